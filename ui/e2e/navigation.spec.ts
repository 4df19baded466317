// The frame of the app: where `/` leads, the main navigation, the workflows list with its
// project switcher and per-row Start, unknown routes and a lost connection.
import { expect, instanceIdFromUrl, instanceState, test, unique } from "./fixtures";

test("/ opens the default project's workflows and the nav links reach every page", async ({ page, request, shot }) => {
  await page.goto("/");
  await expect(page).toHaveURL(/\/projects\/default\/workflows$/);
  await expect(page.getByRole("heading", { name: "Workflows", level: 1 })).toBeVisible();
  await shot("workflows");

  const nav = page.getByRole("navigation").filter({ has: page.getByRole("link", { name: "Instances", exact: true }) });
  await nav.getByRole("link", { name: "Instances", exact: true }).click();
  await expect(page).toHaveURL(/\/instances$/);
  await expect(page.getByRole("heading", { name: "Instances", level: 1 })).toBeVisible();

  await nav.getByRole("link", { name: "Cluster", exact: true }).click();
  await expect(page).toHaveURL(/\/cluster$/);
  await expect(page.getByRole("heading", { name: "Cluster", level: 1 })).toBeVisible();

  await nav.getByRole("link", { name: "Workflows", exact: true }).click();
  await expect(page).toHaveURL(/\/projects\/default\/workflows$/);
  await expect(page.getByRole("heading", { name: "Workflows", level: 1 })).toBeVisible();

  const docs = nav.getByRole("link", { name: "API docs", exact: true });
  const href = await docs.getAttribute("href");
  expect(href).toBeTruthy();
  const res = await request.get(href!);
  expect(res.status(), `GET ${href}`).toBe(200);
});

test("the workflows page lists a project's workflows; a row's Start opens the start form", async ({
  page,
  api,
  shot,
}) => {
  const project = unique("proj");
  const wf = unique("listed");
  await api.apply(
    project,
    `name: ${wf}
params: { who: world }
tasks:
  - { name: hello, type: shell, command: 'echo "hello \${who}"' }
  - { name: bye, type: shell, command: echo bye, depends_on: [hello] }
`,
  );

  // The project switcher lists the new project and switches to it.
  await page.goto("/projects/default/workflows");
  const select = page.getByRole("combobox", { name: "Project", exact: true });
  await expect(select).toHaveValue("default");
  await expect(select.locator("option", { hasText: project })).toHaveCount(1);
  await select.selectOption(project);
  await expect(page).toHaveURL(new RegExp(`/projects/${project}/workflows$`));
  await expect(page.getByRole("heading", { name: "Workflows", level: 1 })).toBeVisible();

  await expect(page.getByRole("link", { name: "New workflow" })).toHaveAttribute(
    "href",
    `/projects/${project}/workflows/new`,
  );
  const row = page.getByRole("row").filter({ has: page.getByRole("link", { name: wf, exact: true }) });
  await expect(row).toHaveCount(1);
  await shot("workflows-project");

  // The start form from the row: every control of the contract, then a dry run.
  await row.getByRole("button", { name: "Start", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: `Start ${wf}` });
  await expect(dialog).toBeVisible();
  await expect(dialog.getByLabel("who", { exact: true })).toHaveValue("world");
  await expect(dialog.getByRole("combobox", { name: "Priority", exact: true })).toBeVisible();
  await expect(dialog.getByRole("combobox", { name: "Start from task", exact: true })).toBeVisible();
  await expect(dialog.getByRole("combobox", { name: "Scope", exact: true })).toBeVisible();
  await dialog.getByLabel("Dry run", { exact: true }).check();
  await shot("start-dialog");
  await dialog.getByRole("button", { name: "Start run" }).click();
  const id = await instanceIdFromUrl(page);
  await expect(page.getByRole("heading", { name: `Instance ${id}` })).toBeVisible();
  await expect(instanceState(page)).toHaveText("success");
  // A dry run: tasks succeed without running, so nothing was printed.
  const inst = await api.instance(id);
  expect(inst.workflow).toBe(wf);
  expect(inst.project).toBe(project);

  // The row links to the workflow page.
  await page.goto(`/projects/${project}/workflows`);
  await page.getByRole("link", { name: wf, exact: true }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/${project}/workflows/${wf}$`));
  await expect(page.getByRole("heading", { name: wf, level: 1 })).toBeVisible();
});

test("the start form's start-from-task and scope run only that task", async ({ page, api, shot }) => {
  const wf = unique("from_task");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: one, type: shell, command: echo one }
  - { name: two, type: shell, command: echo two, depends_on: [one] }
  - { name: three, type: shell, command: echo three, depends_on: [two] }
`,
  );
  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("button", { name: "Start", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: `Start ${wf}` });
  await dialog.getByRole("combobox", { name: "Start from task", exact: true }).selectOption("two");
  await dialog.getByRole("combobox", { name: "Scope", exact: true }).selectOption("only");
  await dialog.getByRole("combobox", { name: "Priority", exact: true }).selectOption("high");
  await shot("start-dialog-from-task");
  await dialog.getByRole("button", { name: "Start run" }).click();
  const id = await instanceIdFromUrl(page);
  await expect(instanceState(page)).toHaveText("success");
  const inst = await api.instance(id);
  expect(inst.tasks.map((t) => t.name)).toEqual(["two"]);
});

test("the start form runs the version chosen in it, with that version's parameters", async ({ page, api, shot }) => {
  const wf = unique("two_versions");
  const v1 = `name: ${wf}\nparams: { who: first }\ntasks:\n  - { name: hello, type: shell, command: 'echo \${who}' }\n`;
  await api.apply("default", v1);
  await api.apply("default", v1.replace("who: first", "who: second").replace("name: hello", "name: greet"));
  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("button", { name: "Start", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: `Start ${wf}` });
  const version = dialog.getByRole("combobox", { name: "Version", exact: true });
  await expect(version).toHaveValue("2");
  await expect(dialog.getByLabel("who", { exact: true })).toHaveValue("second");
  await version.selectOption("1");
  await expect(dialog.getByLabel("who", { exact: true })).toHaveValue("first");
  await expect(
    dialog.getByRole("combobox", { name: "Start from task", exact: true }).getByRole("option", { name: "hello" }),
  ).toHaveCount(1);
  await shot("start-dialog-version");
  await dialog.getByRole("button", { name: "Start run" }).click();
  const id = await instanceIdFromUrl(page);
  await expect(instanceState(page)).toHaveText("success");
  const inst = await api.instance(id);
  expect(inst.tasks.map((t) => t.name)).toEqual(["hello"]);
  expect(inst.version).toBe(1);
});

test("an unknown route says the page was not found", async ({ page, shot }) => {
  await page.goto("/no/such/page");
  await expect(page.getByRole("heading", { name: "Page not found" })).toBeVisible();
  await shot("not-found");
});

test("a lost connection is announced and the page recovers when the server answers again", async ({
  page,
  consoleErrors,
  shot,
}) => {
  // The browser reports every refused request; that is what this test provokes.
  consoleErrors.allow(/Failed to load resource|net::ERR_/);
  await page.goto("/instances");
  await expect(page.getByRole("table", { name: "Instances" })).toBeVisible();
  await page.route("**/api/v1/**", (route) => route.abort("connectionrefused"));
  await expect(page.getByRole("alert").filter({ hasText: "Connection lost" })).toBeVisible();
  await shot("connection-lost");
  await page.unroute("**/api/v1/**");
  await expect(page.getByRole("alert").filter({ hasText: "Connection lost" })).toHaveCount(0, { timeout: 20_000 });
});
