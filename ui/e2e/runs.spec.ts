// Runs from the browser: start with a parameter and watch it succeed live; stop, pause and
// resume; resubmit a failed run where only the failed part runs again; a refused action's
// reason; a sub-workflow's child instance.
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  expect,
  instanceIdFromUrl,
  instanceState,
  node,
  readTable,
  tableHeaders,
  test,
  unique,
  type Api,
} from "./fixtures";
import type { Page } from "@playwright/test";

/** Opens the instance page and checks its heading. */
async function openInstance(page: Page, id: number) {
  await page.goto(`/instances/${id}`);
  await expect(page.getByRole("heading", { name: `Instance ${id}`, level: 1 })).toBeVisible();
}

function button(page: Page, name: string) {
  return page.getByRole("button", { name, exact: true });
}

/**
 * A button the state forbids: disabled, with a title saying why. Soft: a miss fails the
 * test but the rest of the scenario still runs and reports.
 */
async function expectForbidden(page: Page, name: string) {
  const b = button(page, name);
  await expect.soft(b, `${name} is disabled`).toBeDisabled({ timeout: 5000 });
  await expect.soft(b, `${name} says why it is disabled`).toHaveAttribute("title", /\S/, { timeout: 1000 });
}

/** Rows of the "Tasks" table of the task `name` (its name is the cell's button). */
async function attemptsOf(page: Page, name: string): Promise<string[]> {
  const rows = await readTable(page.getByRole("table", { name: "Tasks" }));
  return rows.filter((r) => r.task === name || r.task.startsWith(`${name} `)).map((r) => r.attempt);
}

async function sleeper(api: Api, seconds = 60) {
  const wf = unique("sleeper");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: nap, type: shell, command: 'sleep ${seconds}' }
  - { name: after_nap, type: shell, command: echo awake, depends_on: [nap] }
`,
  );
  return wf;
}

test("start with a parameter from the form and watch the run succeed, DAG coloured, log shown", async ({
  page,
  api,
  shot,
}) => {
  const wf = unique("greeter");
  const value = unique("value");
  await api.apply(
    "default",
    `name: ${wf}
params: { greeting: hello }
tasks:
  - { name: greet, type: shell, command: 'sleep 2; echo "greeting=\${greeting}"' }
  - { name: finish, type: noop, depends_on: [greet] }
`,
  );
  await page.goto(`/projects/default/workflows/${wf}`);
  await button(page, "Start").click();
  const dialog = page.getByRole("dialog", { name: `Start ${wf}` });
  const param = dialog.getByLabel("greeting", { exact: true });
  await expect(param).toHaveValue("hello");
  await param.fill(value);
  await dialog.getByRole("button", { name: "Start run" }).click();

  const id = await instanceIdFromUrl(page);
  await expect(page.getByRole("heading", { name: `Instance ${id}`, level: 1 })).toBeVisible();
  // Live: the node turns running, then success, without a reload.
  await expect(node(page, "greet: running")).toBeVisible();
  await expect(instanceState(page)).toHaveText("running");
  await shot("instance-running");
  await expect(node(page, "greet: success")).toBeVisible();
  await expect(node(page, "finish: success")).toBeVisible();
  await expect(instanceState(page)).toHaveText("success");

  const tasks = page.getByRole("table", { name: "Tasks" });
  expect(await tableHeaders(tasks)).toEqual(
    expect.arrayContaining(["task", "attempt", "state", "worker", "started", "ended", "message"]),
  );
  await expect(page.getByRole("region", { name: "Timeline" })).toBeVisible();

  // The task's log has the parameter's value; search and download work on it.
  await tasks.getByRole("button", { name: "greet", exact: true }).click();
  const log = page.getByRole("log", { name: "Log of greet" });
  await expect(log).toContainText(`greeting=${value}`);
  await page.getByLabel("Search log").fill(value);
  await expect(log).toContainText(`greeting=${value}`);
  await page.getByLabel("Search log").fill("no such text in the log");
  await expect(log).not.toContainText(value);
  await page.getByLabel("Search log").fill("");
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("link", { name: "Download log" }).click(),
  ]);
  const file = await download.path();
  const { readFileSync } = await import("node:fs");
  expect(readFileSync(file, "utf8")).toContain(`greeting=${value}`);
  await shot("instance-success");

  // An ended run cannot be stopped or paused.
  await expectForbidden(page, "Stop");
  await expectForbidden(page, "Pause");
  await expect(button(page, "Rerun")).toBeEnabled();

  const inst = await api.instance(id);
  expect(inst.state).toBe("success");
});

test("stop a running instance", async ({ page, api, shot }) => {
  const wf = await sleeper(api);
  const id = await api.start("default", wf);
  await openInstance(page, id);
  await expect(node(page, "nap: running")).toBeVisible();
  await expectForbidden(page, "Resume");
  await button(page, "Stop").click();
  await expect(instanceState(page)).toHaveText("stopped");
  await expect(node(page, "after_nap: success")).toHaveCount(0);
  await expectForbidden(page, "Stop");
  await expectForbidden(page, "Pause");
  await shot("instance-stopped");
  expect((await api.instance(id)).state).toBe("stopped");
});

test("pause a running instance and resume it", async ({ page, api, shot }) => {
  const wf = await sleeper(api, 5);
  const id = await api.start("default", wf);
  await openInstance(page, id);
  await expect(node(page, "nap: running")).toBeVisible();
  await button(page, "Pause").click();
  // The running task finishes, nothing new starts.
  await expect(instanceState(page)).toHaveText("paused", { timeout: 30_000 });
  await expect(node(page, "nap: success")).toBeVisible();
  await expect(node(page, "after_nap: success")).toHaveCount(0);
  await expectForbidden(page, "Pause");
  await shot("instance-paused");
  await button(page, "Resume").click();
  await expect(instanceState(page)).toHaveText("success");
  await expect(node(page, "after_nap: success")).toBeVisible();
});

test("a refused action shows the server's reason", async ({ page, api, consoleErrors, shot }) => {
  consoleErrors.allow(/status of 409/);
  const wf = await sleeper(api);
  const id = await api.start("default", wf);
  await openInstance(page, id);
  await expect(node(page, "nap: running")).toBeVisible();
  await expect(button(page, "Pause")).toBeEnabled();
  // Hold the page's refreshes so it still offers Pause after the run was stopped elsewhere.
  const held: import("@playwright/test").Route[] = [];
  await page.route(`**/api/v1/instances/${id}`, (route) => {
    held.push(route);
  });
  expect((await api.post(`/instances/${id}/stop`)).status()).toBe(202);
  await api.waitState(id, ["stopped"]);
  await button(page, "Pause").click();
  await expect(page.getByRole("alert")).toContainText("stopped");
  await shot("instance-refused");
  await page.unroute(`**/api/v1/instances/${id}`);
  for (const r of held) await r.continue().catch(() => undefined);
  await expect(instanceState(page)).toHaveText("stopped");
});

test("resubmit a failed run: only the failed part runs again", async ({ page, api, shot }) => {
  const wf = unique("flaky");
  const marker = join(tmpdir(), `shoal-e2e-marker-${wf}`);
  rmSync(marker, { force: true });
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: first, type: shell, command: echo first }
  - { name: shaky, type: shell, depends_on: [first],
      command: 'test -f ${marker} || { touch ${marker}; echo failing once; exit 1; }' }
  - { name: last, type: shell, command: echo last, depends_on: [shaky] }
`,
  );
  try {
    const id = await api.start("default", wf);
    await openInstance(page, id);
    await expect(instanceState(page)).toHaveText("failure");
    await expect(node(page, "first: success")).toBeVisible();
    await expect(node(page, "shaky: failure")).toBeVisible();
    await expectForbidden(page, "Stop");
    await shot("instance-failed");

    await button(page, "Resubmit failed").click();
    await expect(instanceState(page)).toHaveText("success");
    for (const t of ["first", "shaky", "last"]) await expect(node(page, `${t}: success`)).toBeVisible();
    // The task that had passed ran once; the failed one twice.
    await expect.poll(() => attemptsOf(page, "first")).toHaveLength(1);
    await expect.poll(() => attemptsOf(page, "shaky")).toHaveLength(2);
    expect((await attemptsOf(page, "shaky")).sort()).toEqual(["1", "2"]);
    await shot("instance-resubmitted");

    const inst = await api.instance(id);
    expect(inst.state).toBe("success");
    expect(inst.tasks.filter((t) => t.name === "first")).toHaveLength(1);
    expect(inst.tasks.filter((t) => t.name === "shaky")).toHaveLength(2);
  } finally {
    rmSync(marker, { force: true });
  }
});

test("a sub-workflow task links to its child instance", async ({ page, api, shot }) => {
  const child = unique("child");
  const parent = unique("parent");
  await api.apply("default", `name: ${child}\ntasks:\n  - { name: inner, type: shell, command: echo inner }\n`);
  await api.apply(
    "default",
    `name: ${parent}
tasks:
  - { name: call_child, type: sub_workflow, sub_workflow: { workflow: ${child}, project: default } }
`,
  );
  const id = await api.start("default", parent);
  await openInstance(page, id);
  await expect(instanceState(page)).toHaveText("success");
  const link = page.getByRole("table", { name: "Tasks" }).getByRole("link", { name: /^child instance \d+$/ });
  await expect(link).toBeVisible();
  const childId = Number(/\d+/.exec((await link.textContent()) ?? "")![0]);
  await link.click();
  await expect(page).toHaveURL(new RegExp(`/instances/${childId}$`));
  await expect(page.getByRole("heading", { name: `Instance ${childId}`, level: 1 })).toBeVisible();
  await expect(instanceState(page)).toHaveText("success");
  await expect(node(page, "inner: success")).toBeVisible();
  await shot("instance-child");
  // And back to the parent.
  await page.getByRole("link", { name: `parent instance ${id}`, exact: true }).click();
  await expect(page).toHaveURL(new RegExp(`/instances/${id}$`));
  await expect(page.getByRole("heading", { name: `Instance ${id}`, level: 1 })).toBeVisible();
});
