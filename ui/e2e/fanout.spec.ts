// A foreach and a do_while in the instance view: the DAG shows each with its progress,
// and every child and iteration is its own row in the task table.
import { expect, instanceState, test, unique } from "./fixtures";

test("foreach children and loop iterations appear as their own task instances", async ({ page, api, shot }) => {
  const wf = unique("fanloop");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: each, type: foreach,
      foreach: { items: "['a', 'b', 'c']", as: file, task: { type: shell, command: 'echo \${file}' } } }
  - { name: poll, type: do_while, depends_on: [each],
      do_while: { condition: "iteration < 2",
                  tasks: [ { name: check, type: shell, command: 'echo check \${iteration}' } ] } }
`,
  );
  const id = await api.start("default", wf);
  await page.goto(`/instances/${id}`);
  await expect(instanceState(page)).toHaveText("success");
  const dag = page.getByRole("region", { name: "DAG" });
  await expect(dag.getByLabel("each: success · 3 done")).toBeVisible();
  await expect(dag.getByLabel("poll: success · ×2")).toBeVisible();
  const table = page.getByRole("table", { name: "Tasks" });
  for (const name of ["each[0]", "each[1]", "each[2]", "poll[1].check", "poll[2].check"])
    await expect(table.getByRole("row").filter({ hasText: name })).toHaveCount(1);
  await expect(table.getByRole("row").filter({ hasText: "3 of 3 items passed" })).toHaveCount(1);
  await expect(table.getByRole("row").filter({ hasText: "2 iterations; the condition no longer holds" })).toHaveCount(
    1,
  );
  await shot("foreach-and-loop");
  await table.getByRole("button", { name: "poll[2].check", exact: true }).click();
  await expect(page.getByRole("log", { name: "Log of poll[2].check" })).toContainText("check 2");
});
