// A project's environments on its settings page: one is set through the form, its lines
// shown, edited; a run's shell task sees what it exports; deleting it while a workflow
// names it is refused, naming the workflow.
import { expect, test, unique } from "./fixtures";

test("an environment set and edited on the project page reaches a task", async ({ page, api, shot, consoleErrors }) => {
  const project = unique("envs");
  const created = await api.post("/projects", { name: project });
  expect(created.status(), await created.text()).toBe(201);

  await page.goto(`/projects/${project}`);
  const table = page.getByRole("table", { name: "Environments" });
  await expect(page.getByText("No environments.")).toBeVisible();
  const form = page.getByRole("form", { name: "Set environment" });
  await form.getByLabel("Name").fill("jdk17");
  await form.getByLabel("Description").fill("java for builds");
  await form.getByLabel("Shell lines").fill("export JAVA_HOME=/opt/jdk-16\nexport GREETING=hello");
  await form.getByRole("button", { name: "Set environment" }).click();
  await expect(table).toContainText("export JAVA_HOME=/opt/jdk-16");
  await expect(form.getByLabel("Name")).toHaveValue("");

  // Edit: the form takes its lines; setting it again replaces them.
  await table.getByRole("row").filter({ hasText: "jdk17" }).getByRole("button", { name: "Edit" }).click();
  await expect(form.getByLabel("Name")).toHaveValue("jdk17");
  await expect(form.getByLabel("Shell lines")).toHaveValue("export JAVA_HOME=/opt/jdk-16\nexport GREETING=hello");
  await form.getByLabel("Shell lines").fill("export JAVA_HOME=/opt/jdk-17\nexport GREETING=hello");
  await form.getByRole("button", { name: "Set environment" }).click();
  await expect(table).toContainText("export JAVA_HOME=/opt/jdk-17");
  await expect(table).not.toContainText("jdk-16");
  await expect(table).toContainText("java for builds");
  await shot("project-environments");

  await api.apply(
    project,
    `name: java_build
environment: jdk17
tasks:
  - { name: build, type: shell, command: 'echo "$GREETING from $JAVA_HOME"' }
`,
  );
  const id = await api.start(project, "java_build");
  const inst = await api.waitState(id, ["success", "failure"]);
  expect(inst.state).toBe("success");
  const log = await api.get(`/task-instances/${inst.tasks[0].id}/log`);
  expect(await log.text()).toContain("hello from /opt/jdk-17");

  // Named by the workflow: deleting it is refused, and the page says why.
  consoleErrors.allow(/status of 409/);
  await table.getByRole("row").filter({ hasText: "jdk17" }).getByRole("button", { name: "Delete" }).click();
  await expect(page.getByRole("alert")).toContainText("workflow 'java_build'");
  await expect(table).toContainText("jdk17");
});
