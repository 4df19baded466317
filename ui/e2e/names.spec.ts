// Names in the user's own language: a project, workflow and tasks named in Chinese,
// Japanese and with an accent, opened from the project switcher and the workflows list
// (percent-encoded URLs), its DAG drawn with the names, started from the page, and the
// run's DAG, tasks and log shown with them.
import { expect, instanceIdFromUrl, instanceState, node, test, unique } from "./fixtures";

test("a workflow named in Chinese: its page, DAG and a run show the names", async ({ page, api, shot }) => {
  const suffix = unique("").slice(1);
  const project = `数据仓库_${suffix}`;
  const wf = `日次集計_${suffix}`;
  await api.apply(
    project,
    `name: ${wf}
tasks:
  - { name: 前置sql节点, type: shell, command: "echo '\${setValue(rows=3)}'" }
  - name: café_検査
    type: conditions
    depends_on: [前置sql节点]
    conditions: { when: "outputs['前置sql节点'].rows == 3", success: [データ取り込み], failure: [失败处理] }
  - { name: データ取り込み, type: shell, depends_on: [café_検査], command: 'echo "loaded \${rows} rows"' }
  - { name: 失败处理, type: shell, depends_on: [café_検査], command: echo failed }
`,
  );

  await page.goto("/projects/default/workflows");
  await page.getByRole("combobox", { name: "Project", exact: true }).selectOption(project);
  await expect(page).toHaveURL(`/projects/${encodeURIComponent(project)}/workflows`);
  await page.getByRole("link", { name: wf, exact: true }).click();
  await expect(page).toHaveURL(`/projects/${encodeURIComponent(project)}/workflows/${encodeURIComponent(wf)}`);
  await expect(page.getByRole("heading", { name: wf, level: 1 })).toBeVisible();
  for (const label of ["前置sql节点 (shell)", "café_検査 (conditions)", "データ取り込み (shell)", "失败处理 (shell)"])
    await expect(node(page, label)).toBeVisible();
  await shot("unicode-workflow");

  // A reload of the encoded URL finds the same page.
  await page.reload();
  await expect(page.getByRole("heading", { name: wf, level: 1 })).toBeVisible();

  await page.getByRole("button", { name: "Start", exact: true }).click();
  await page
    .getByRole("dialog", { name: `Start ${wf}` })
    .getByRole("button", { name: "Start run" })
    .click();
  const id = await instanceIdFromUrl(page);
  await expect(instanceState(page)).toHaveText("success", { timeout: 30_000 });
  await expect(node(page, "前置sql节点: success")).toBeVisible();
  await expect(node(page, "データ取り込み: success")).toBeVisible();
  await expect(page.getByRole("link", { name: wf, exact: true }).first()).toHaveAttribute(
    "href",
    `/projects/${encodeURIComponent(project)}/workflows/${encodeURIComponent(wf)}`,
  );
  const tasks = page.getByRole("table", { name: "Tasks" });
  await tasks.getByRole("button", { name: "データ取り込み", exact: true }).click();
  await expect(page.getByRole("log", { name: "Log of データ取り込み" })).toContainText("loaded 3 rows");
  await shot("unicode-instance");

  const inst = await api.instance(id);
  expect(inst.workflow).toBe(wf);
  expect(inst.project).toBe(project);
});
