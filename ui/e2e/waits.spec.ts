// Waiting tasks from the browser: an approval completed with an output that reaches the
// next task, and one rejected, which fails its run.
import { expect, instanceState, test, unique } from "./fixtures";

test("complete a waiting approval with an output, and fail another", async ({ page, api, shot }) => {
  const wf = unique("approval");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: approve, type: wait, timeout: 10m }
  - { name: ship, type: shell, depends_on: [approve], command: 'echo "shipped by \${approved_by}"' }
`,
  );
  const id = await api.start("default", wf);
  await page.goto(`/instances/${id}`);
  const card = page.getByRole("region", { name: "Waiting tasks" }).getByLabel("Waiting task approve");
  await expect(card).toContainText("approve (wait task) is waiting to be completed");
  await shot("waiting-task");
  await card.getByLabel("Outputs").fill("approved_by=ann");
  await card.getByLabel("Message").fill("looks good");
  await card.getByRole("button", { name: "Complete", exact: true }).click();
  await expect(instanceState(page)).toHaveText("success");
  await expect(page.getByRole("region", { name: "Waiting tasks" })).toHaveCount(0);
  const inst = await api.instance(id);
  const approve = inst.tasks.find((t) => t.name === "approve")!;
  expect(approve.state).toBe("success");
  const ship = inst.tasks.find((t) => t.name === "ship")!;
  const log = await api.get(`/task-instances/${ship.id}/log`);
  expect(await log.text()).toContain("shipped by ann");

  const rejected = await api.start("default", wf);
  await page.goto(`/instances/${rejected}`);
  const again = page.getByLabel("Waiting task approve");
  await again.getByLabel("Outputs").fill("not a pair");
  await again.getByRole("button", { name: "Fail", exact: true }).click();
  await expect(again.getByRole("alert")).toHaveText('"not a pair" is not key=value');
  await again.getByLabel("Outputs").fill("");
  await again.getByRole("button", { name: "Fail", exact: true }).click();
  await expect(instanceState(page)).toHaveText("failure");
  await shot("waiting-task-rejected");
});
