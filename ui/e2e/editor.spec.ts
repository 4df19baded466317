// Writing a workflow in the editor: server validation (a cycle, an unknown dependency)
// refuses it with the offending task named and stores nothing; a valid one shows its DAG
// preview, Apply stores it and opens the workflow page; editing stores version 2 and the
// versions diff shows the change.
import { dag, expect, node, test, typeYaml, unique } from "./fixtures";

test("write a workflow in the editor: a cycle is refused and nothing stored; Apply stores a valid one", async ({
  page,
  api,
  consoleErrors,
  shot,
}) => {
  // Validation answers 400 for the broken drafts; the browser logs those responses.
  consoleErrors.allow(/status of 400/);
  const wf = unique("edited");

  await page.goto("/projects/default/workflows");
  await page.getByRole("link", { name: "New workflow" }).click();
  await expect(page).toHaveURL(/\/projects\/default\/workflows\/new$/);
  const editor = page.getByRole("textbox", { name: "Workflow YAML" });
  await expect(editor).toBeVisible();

  // A cycle: refused, the message names the tasks in it.
  await typeYaml(
    page,
    `name: ${wf}
tasks:
  - { name: left_side, type: shell, command: echo left, depends_on: [right_side] }
  - { name: right_side, type: shell, command: echo right, depends_on: [left_side] }
`,
  );
  const alert = page.getByRole("alert");
  await expect(alert).toContainText(/left_side|right_side/);
  // It is pinned to the line of a task on the cycle.
  await expect(alert).toContainText(/^Line [34]: /);
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(alert).toContainText(/left_side|right_side/);
  await expect(page).toHaveURL(/\/workflows\/new$/);
  await shot("editor-cycle");
  expect((await api.get(`/projects/default/workflows/${wf}`)).status()).toBe(404);

  // An unknown dependency: the message names the task that has it.
  await typeYaml(
    page,
    `name: ${wf}
tasks:
  - { name: extract, type: shell, command: echo extract }
  - { name: loader, type: shell, command: echo load, depends_on: [ghost] }
`,
  );
  await expect(alert).toContainText("loader");
  await expect(alert).toContainText(/^Line 4: /);
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(alert).toContainText("loader");
  expect((await api.get(`/projects/default/workflows/${wf}`)).status()).toBe(404);

  // A valid one: no alert, the preview draws its tasks, Apply stores it.
  await typeYaml(
    page,
    `name: ${wf}
params: { day: "2026-01-01" }
tasks:
  - { name: extract, type: shell, command: 'echo "extract \${day}"' }
  - { name: loader, type: shell, command: echo load, depends_on: [extract] }
`,
  );
  await expect(page.getByRole("alert")).toHaveCount(0);
  const preview = dag(page, "DAG preview");
  await expect(preview.getByText("extract", { exact: true })).toBeVisible();
  await expect(preview.getByText("loader", { exact: true })).toBeVisible();
  await shot("editor-valid");
  await page.getByRole("button", { name: "Apply" }).click();

  await expect(page).toHaveURL(new RegExp(`/projects/default/workflows/${wf}$`));
  await expect(page.getByRole("heading", { name: wf, level: 1 })).toBeVisible();
  await expect(node(page, "extract (shell)")).toBeVisible();
  await expect(node(page, "loader (shell)")).toBeVisible();
  await expect(page.getByRole("region", { name: "Definition" })).toContainText("loader");
  await expect(page.getByRole("list", { name: "Versions" }).getByRole("listitem")).toHaveCount(1);
  for (const tab of ["Overview", "Edit", "Schedule", "Backfill"])
    await expect(page.getByRole("link", { name: tab, exact: true })).toBeVisible();
  await expect(page.getByRole("button", { name: "Start", exact: true })).toBeVisible();
  await shot("workflow");
  const stored = await api.json<{ version: number }>(`/projects/default/workflows/${wf}`);
  expect(stored.version).toBe(1);
});

test("edit a workflow: Apply stores version 2 and the diff shows the change", async ({ page, api, shot }) => {
  const wf = unique("versioned");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: first, type: shell, command: echo first }
`,
  );
  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("link", { name: "Edit", exact: true }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/default/workflows/${wf}/edit$`));
  // The stored definition is loaded into the editor.
  const editor = page.getByRole("textbox", { name: "Workflow YAML" });
  await expect(editor).toContainText("first");
  await shot("editor-edit");
  await typeYaml(
    page,
    `name: ${wf}
tasks:
  - { name: first, type: shell, command: echo first }
  - { name: second_step, type: noop, depends_on: [first] }
`,
  );
  await expect(dag(page, "DAG preview").getByText("second_step", { exact: true })).toBeVisible();
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/default/workflows/${wf}$`));
  await expect(page.getByRole("list", { name: "Versions" }).getByRole("listitem")).toHaveCount(2);
  await expect(node(page, "second_step (noop)")).toBeVisible();
  await expect(page.getByRole("region", { name: "Diff" })).toContainText("second_step");
  await shot("workflow-versions");
  expect((await api.json<{ version: number }>(`/projects/default/workflows/${wf}`)).version).toBe(2);
});
