// Drawing a workflow in the visual editor: tasks dragged from the palette, edges drawn
// between handles, Apply, a run that succeeds; a form edit seen in the YAML; an edge that
// would close a cycle refused with the server's reason; keyboard paths (delete, undo,
// connect through the form).
import { expect, instanceIdFromUrl, test, typeYaml, unique, type Api } from "./fixtures";
import type { Locator, Page } from "@playwright/test";
import { parse } from "yaml";

const canvas = (page: Page) => page.getByRole("region", { name: "Workflow canvas" });
const taskNode = (page: Page, name: string) => canvas(page).locator(`.react-flow__node[data-id="${name}"]`);

/** Drags a task type from the palette onto the canvas at (x, y) of the canvas. */
async function drop(page: Page, type: string, x: number, y: number) {
  await page.getByRole("button", { name: `Add ${type} task` }).dragTo(canvas(page), { targetPosition: { x, y } });
}

/** Draws an edge from `source`'s bottom handle to `target`'s top handle with the mouse. */
async function draw(page: Page, source: string, target: string) {
  const from = await center(taskNode(page, source).locator(".react-flow__handle.source"));
  const to = await center(taskNode(page, target).locator(".react-flow__handle.target"));
  await page.mouse.move(from.x, from.y);
  await page.mouse.down();
  await page.mouse.move((from.x + to.x) / 2, (from.y + to.y) / 2, { steps: 5 });
  await page.mouse.move(to.x, to.y, { steps: 5 });
  await page.mouse.up();
}

async function center(l: Locator) {
  const box = (await l.boundingBox())!;
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
}

/** The definition the YAML view shows. */
async function yamlText(page: Page): Promise<string> {
  await page.getByRole("group", { name: "View" }).getByRole("button", { name: "YAML" }).click();
  const text = (await page.getByRole("textbox", { name: "Workflow YAML" }).innerText()).replace(/\u00a0/g, " ");
  await page.getByRole("group", { name: "View" }).getByRole("button", { name: "Visual" }).click();
  await expect(canvas(page)).toBeVisible();
  return text;
}

async function stored(api: Api, wf: string) {
  return api.json<{ definition: { tasks: { name: string; depends_on?: string[]; retries?: number }[] } }>(
    `/projects/default/workflows/${wf}`,
  );
}

test("draw a 5-task workflow with a branch by drag and drop, apply it and run it to success", async ({
  page,
  api,
  shot,
  consoleErrors,
}) => {
  consoleErrors.allow(/status of 400/); // drafts the server refuses while they are drawn
  const wf = unique("drawn");
  await page.goto("/projects/default/workflows/new");
  await page.getByRole("button", { name: "Visual" }).click();
  await expect(page).toHaveURL(/view=visual/);
  await expect(taskNode(page, "extract")).toBeVisible();

  // The template's two tasks go, by keyboard: Tab to a node, Delete.
  for (const name of ["load", "extract"]) {
    await taskNode(page, name).focus();
    await page.keyboard.press("Enter");
    await page.keyboard.press("Delete");
    await expect(taskNode(page, name)).toHaveCount(0);
  }

  // Five tasks dragged from the palette: a fork after shell_1, joined by noop_1.
  await drop(page, "shell", 300, 60);
  await drop(page, "shell", 150, 180);
  await drop(page, "shell", 450, 180);
  await drop(page, "noop", 300, 300);
  await drop(page, "shell", 300, 420);
  for (const n of ["shell_1", "shell_2", "shell_3", "noop_1", "shell_4"]) await expect(taskNode(page, n)).toBeVisible();
  await draw(page, "shell_1", "shell_2");
  await draw(page, "shell_1", "shell_3");
  await draw(page, "shell_2", "noop_1");
  await draw(page, "shell_3", "noop_1");
  await draw(page, "noop_1", "shell_4");
  await expect(canvas(page).locator(".react-flow__edge")).toHaveCount(5);

  // The workflow's name, in the workflow form (no task selected).
  await page.getByRole("combobox", { name: "Edit" }).selectOption("");
  const name = page.getByRole("form", { name: "Workflow" }).getByRole("textbox", { name: "name", exact: true });
  await name.fill(wf);
  await name.press("Enter");
  await expect(page.getByRole("status")).toHaveText("Valid: 5 tasks. Apply stores a new version.");
  await page.getByRole("button", { name: "Auto-layout" }).click();
  await shot("visual-drawn");

  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/default/workflows/${wf}$`));
  const def = (await stored(api, wf)).definition;
  expect(Object.fromEntries(def.tasks.map((t) => [t.name, t.depends_on ?? []]))).toEqual({
    shell_1: [],
    shell_2: ["shell_1"],
    shell_3: ["shell_1"],
    noop_1: ["shell_2", "shell_3"],
    shell_4: ["noop_1"],
  });

  await page.getByRole("button", { name: "Start", exact: true }).click();
  await page
    .getByRole("dialog", { name: `Start ${wf}` })
    .getByRole("button", { name: "Start run" })
    .click();
  const id = await instanceIdFromUrl(page);
  await expect(page.getByRole("status", { name: "Instance state" })).toHaveText(/success/, { timeout: 60_000 });
  const run = await api.instance(id);
  expect(run.tasks.map((t) => `${t.name}:${t.state}`).sort()).toEqual(
    ["noop_1", "shell_1", "shell_2", "shell_3", "shell_4"].map((n) => `${n}:success`),
  );
});

test("a form edit changes the YAML, every other field kept; undo and redo by keyboard", async ({
  page,
  shot,
  consoleErrors,
}) => {
  consoleErrors.allow(/status of 400/);
  await page.goto("/projects/default/workflows/new?view=visual");
  await expect(taskNode(page, "load")).toBeVisible();
  const before = await yamlText(page);

  // Select `load` by keyboard, then fill its retries and timeout.
  await taskNode(page, "load").focus();
  await page.keyboard.press("Enter");
  const form = page.getByRole("form", { name: "Task load" });
  await expect(form).toBeVisible();
  await form.getByRole("spinbutton", { name: "retries", exact: true }).fill("3");
  await form.getByRole("spinbutton", { name: "retries", exact: true }).press("Enter");
  await form.getByRole("textbox", { name: "timeout", exact: true }).fill("10m");
  await form.getByRole("textbox", { name: "timeout", exact: true }).press("Enter");
  await form.getByRole("combobox", { name: "priority" }).selectOption("high");
  await shot("visual-form");

  const after = await yamlText(page);
  expect(after).toMatch(/retries: 3/);
  expect(after).toMatch(/timeout: 10m/);
  expect(after).toMatch(/priority: high/);
  // Nothing else changed: the lines of the template are all still there.
  for (const line of before.split("\n").filter((l) => l.trim())) expect(after).toContain(line);

  // A palette entry by keyboard: Enter adds the task (below the others) and opens its form.
  await page.getByRole("button", { name: "Add noop task" }).focus();
  await page.keyboard.press("Enter");
  await expect(page.getByRole("form", { name: "Task noop_1" })).toBeVisible();
  await expect(taskNode(page, "noop_1")).toBeVisible();
  await page.keyboard.press("Control+z"); // focus is on the palette, inside the editor
  await expect(taskNode(page, "noop_1")).toHaveCount(0);

  // Undo three times by keyboard: the YAML is the template again; redo once.
  await canvas(page).click({ position: { x: 5, y: 5 } });
  for (let i = 0; i < 3; i++) await page.keyboard.press("Control+z");
  expect(await yamlText(page)).toBe(before);
  await canvas(page).click({ position: { x: 5, y: 5 } });
  await page.keyboard.press("Control+Shift+z");
  expect(await yamlText(page)).toMatch(/retries: 3/);
});

test("an edge that closes a cycle is refused on the canvas with the server's reason", async ({
  page,
  shot,
  consoleErrors,
}) => {
  consoleErrors.allow(/status of 400/);
  await page.goto("/projects/default/workflows/new?view=visual");
  await expect(page.getByRole("status")).toHaveText(/^Valid: 2 tasks/);

  // By keyboard: extract's form, "load" chosen in "Add dependency": refused.
  await page.getByRole("combobox", { name: "Edit" }).selectOption("extract");
  const form = page.getByRole("form", { name: "Task extract" });
  await form.getByRole("combobox", { name: "Add dependency" }).focus();
  await page.keyboard.press("ArrowDown");
  const alert = page.getByRole("alert");
  const reason = "Edge load → extract refused: tasks form a cycle: extract -> load -> extract";
  await expect(alert).toHaveText(reason);
  await expect(form.getByRole("checkbox", { name: "load" })).toHaveCount(0);

  // A change that is taken clears the refusal.
  await form.getByRole("spinbutton", { name: "retries", exact: true }).fill("1");
  await form.getByRole("spinbutton", { name: "retries", exact: true }).press("Enter");
  await expect(alert).toHaveCount(0);

  // By mouse: load → extract, refused the same; the canvas keeps its one edge.
  await draw(page, "load", "extract");
  await expect(alert).toHaveText(reason);
  await expect(canvas(page).locator(".react-flow__edge")).toHaveCount(1);
  await shot("visual-cycle");
  expect(await yamlText(page)).not.toMatch(/depends_on: \[load\]/);

  // A task the server refuses is marked on its node: a shell task without a command.
  await page.getByRole("combobox", { name: "Edit" }).selectOption("load");
  const command = page.getByRole("form", { name: "Task load" }).getByRole("textbox", { name: "command" });
  await command.fill("");
  await command.press("Control+Enter");
  await expect(canvas(page).getByLabel(/^load \(shell\): task 'load' of type shell needs 'command'$/)).toBeVisible();
  await expect(taskNode(page, "load").locator(".dag-node")).toHaveClass(/tone-bad/);
  await shot("visual-invalid-task");
});

test("a do_while's body is drawn inside it and edited there: drop, connect, form", async ({
  page,
  shot,
  consoleErrors,
}) => {
  consoleErrors.allow(/status of 400/);
  await page.goto("/projects/default/workflows/new");
  await typeYaml(
    page,
    `name: ${unique("looped")}
tasks:
  # polled until ready
  - { name: poll, type: do_while,
      do_while: { condition: "outputs.check.ready != 'yes'", max_iterations: 3,
                  tasks: [ { name: check, type: shell, command: echo check },
                           { name: rest, type: delay, delay: 1s, depends_on: [check] } ] } }
  - { name: load, type: shell, depends_on: [poll], command: echo loaded }
`,
  );
  await expect(page.getByRole("status")).toHaveText(/^Valid: 2 tasks/);
  await page.getByRole("button", { name: "Visual" }).click();
  await expect(canvas(page).getByLabel("poll (do_while)", { exact: true })).toBeVisible();
  await expect(canvas(page).getByLabel("check (shell) in poll", { exact: true })).toBeVisible();
  await expect(canvas(page).getByLabel("check → rest in poll", { exact: true })).toHaveCount(1);
  await expect(canvas(page).getByLabel("poll → load", { exact: true })).toHaveCount(1);

  // A shell task dropped on the group goes into the body; an edge drawn inside it stays there.
  const group = await taskNode(page, "poll").boundingBox();
  const area = (await canvas(page).boundingBox())!;
  await drop(page, "shell", group!.x - area.x + group!.width / 2, group!.y - area.y + group!.height - 8);
  await expect(canvas(page).getByLabel("shell_1 (shell) in poll", { exact: true })).toBeVisible();
  await draw(page, "poll/rest", "poll/shell_1");
  await expect(canvas(page).getByLabel("rest → shell_1 in poll", { exact: true })).toHaveCount(1);

  // By keyboard: poll's form adds a task to its body.
  await page.getByRole("combobox", { name: "Edit" }).selectOption("poll");
  await page
    .getByRole("form", { name: "Task poll" })
    .getByRole("combobox", { name: "add a task to its body" })
    .selectOption("noop");
  await expect(canvas(page).getByLabel("noop_1 (noop) in poll", { exact: true })).toBeVisible();
  await expect(page.getByRole("form", { name: "Task noop_1" })).toBeVisible();
  await page.getByRole("button", { name: "Undo" }).click();
  await expect(canvas(page).getByLabel("noop_1 (noop) in poll", { exact: true })).toHaveCount(0);

  // An edge from the body to a task outside it is refused.
  await draw(page, "poll/shell_1", "load");
  await expect(page.getByRole("alert")).toContainText(
    "Edge poll in shell_1 → load refused: tasks connect only within one list",
  );

  // The body's task in the form: its command, edited, lands in the do_while's tasks.
  await page.getByRole("combobox", { name: "Edit" }).selectOption({ label: "task shell_1 in poll" });
  const command = page.getByRole("form", { name: "Task shell_1" }).getByRole("textbox", { name: "command" });
  await command.fill("echo polled");
  await command.press("Control+Enter");
  await expect(page.getByRole("status")).toHaveText(/^Valid: 2 tasks/);
  await shot("visual-loop");
  const text = await yamlText(page);
  expect(text).toContain("# polled until ready"); // comments survive canvas edits
  const def = parse(text) as { tasks: Record<string, unknown>[] };
  expect(def.tasks[0].do_while).toMatchObject({
    tasks: [
      { name: "check", type: "shell", command: "echo check" },
      { name: "rest", type: "delay", delay: "1s", depends_on: ["check"] },
      { name: "shell_1", type: "shell", command: "echo polled", depends_on: ["rest"] },
    ],
  });
  // The body's edits left the workflow's own tasks as they were.
  expect(def.tasks[1]).toEqual({ name: "load", type: "shell", depends_on: ["poll"], command: "echo loaded" });
});

test("edit a stored workflow in the visual editor: Apply stores version 2 with the change", async ({ page, api }) => {
  const wf = unique("revisited");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: first, type: shell, command: echo first }
`,
  );
  await page.goto(`/projects/default/workflows/${wf}/edit?view=visual`);
  await expect(taskNode(page, "first")).toBeVisible();
  await page.getByRole("combobox", { name: "Edit" }).selectOption("first");
  const retries = page
    .getByRole("form", { name: "Task first" })
    .getByRole("spinbutton", { name: "retries", exact: true });
  await retries.fill("2");
  await retries.press("Enter");
  await expect(page.getByRole("status")).toHaveText(/^Valid: 1 tasks/);
  expect(await yamlText(page)).toMatch(/name: first\s+type: shell\s+command: echo first\s+retries: 2/);
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/default/workflows/${wf}$`));
  const stored = await api.json<{ version: number; yaml: string; definition: { tasks: { retries?: number }[] } }>(
    `/projects/default/workflows/${wf}`,
  );
  expect(stored.version).toBe(2);
  expect(stored.definition.tasks[0].retries).toBe(2);
});
