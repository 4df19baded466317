// Task actions from the instance page: a hanging task killed from its row fails the run,
// then forced to success from the same row, after which the run finishes past it; then
// the last task is rerun alone.
import { expect, instanceState, test, unique } from "./fixtures";

test("kill a running task, force it to success so the run goes on, rerun the last task", async ({
  page,
  api,
  shot,
}) => {
  const wf = unique("stuck");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: hang, type: shell, command: 'sleep 60' }
  - { name: after, type: shell, depends_on: [hang], command: 'echo went on' }
`,
  );
  const id = await api.start("default", wf);
  await page.goto(`/instances/${id}`);
  const tasks = page.getByRole("table", { name: "Tasks" });
  const kill = tasks.getByRole("button", { name: "Kill hang" });
  await expect(kill).toBeVisible();
  await shot("task-kill-offered");
  await kill.click();
  await expect(instanceState(page)).toHaveText("failure");
  await expect(tasks.getByRole("button", { name: "Kill hang" })).toHaveCount(0);

  const force = tasks.getByRole("button", { name: "Force success hang" });
  await expect(force).toBeVisible();
  await shot("task-force-success-offered");
  await force.click();
  await expect(instanceState(page)).toHaveText("success");
  await expect(tasks.getByRole("row").filter({ hasText: "hang" })).toContainText("forced_success");
  await shot("task-forced-success");
  const inst = await api.instance(id);
  const after = inst.tasks.find((t) => t.name === "after")!;
  expect(after.state).toBe("success");
  const log = await api.get(`/task-instances/${after.id}/log`);
  expect(await log.text()).toContain("went on");

  await tasks.getByRole("button", { name: "Rerun from here after" }).click();
  await expect(tasks.getByRole("row").filter({ hasText: "after" })).toHaveCount(2);
  await expect(instanceState(page)).toHaveText("success");
  await shot("task-rerun");
  const again = await api.instance(id);
  const afters = again.tasks.filter((t) => t.name === "after");
  expect(afters.map((t) => [t.attempt, t.state])).toEqual([
    [1, "success"],
    [2, "success"],
  ]);
  expect(again.tasks.filter((t) => t.name === "hang")).toHaveLength(1);
});
