// A workflow's lifecycle from its page: taken offline (Start is refused and greyed out,
// the list says so), brought online again, and rolled back to its first version.
import { expect, test, unique } from "./fixtures";

test("take a workflow offline and online, and make an old version the latest", async ({ page, api, shot }) => {
  const wf = unique("lifecycle");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: a, type: shell, command: 'echo one' }\n`);
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: a, type: shell, command: 'echo two' }\n`);
  await page.goto(`/projects/default/workflows/${wf}`);
  const head = page.locator(".pagehead");
  await expect(head).toContainText("v2");

  await page.getByRole("button", { name: "Take offline" }).click();
  await expect(page.getByLabel("Release state")).toHaveText("offline");
  await expect(head.getByRole("button", { name: "Start" })).toBeDisabled();
  await shot("workflow-offline");
  const refused = await api.post(`/projects/default/workflows/${wf}/start`, {});
  expect(refused.status()).toBe(409);
  expect((await refused.json()).error).toContain("is offline");
  await page.goto("/projects/default/workflows");
  const row = page.getByRole("row").filter({ has: page.getByRole("link", { name: wf, exact: true }) });
  await expect(row).toContainText("offline");
  await expect(row.getByRole("button", { name: "Start" })).toBeDisabled();

  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("button", { name: "Bring online" }).click();
  await expect(page.getByLabel("Release state")).toHaveCount(0);
  await expect(head.getByRole("button", { name: "Start" })).toBeEnabled();

  const versions = page.getByRole("list", { name: "Versions" });
  await versions.getByRole("listitem").filter({ hasText: "v1" }).getByRole("button", { name: "Make latest" }).click();
  await expect(head).toContainText("v3");
  await expect(page.getByRole("region", { name: "Definition" })).toContainText("echo one");
  await shot("workflow-rolled-back");
});
