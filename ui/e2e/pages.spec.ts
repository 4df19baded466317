// The Instances and Cluster pages, and a tour of every page that fails on any console
// error (the console guard of fixtures.ts applies to every test; here nothing is allowed).
import { expect, instanceState, readTable, test, unique } from "./fixtures";

test("the instances page filters by workflow and state and pages through the results", async ({ page, api, shot }) => {
  const wf = unique("listed_runs");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: only, type: shell, command: echo only }\n`);
  const ids = [await api.start("default", wf), await api.start("default", wf)];
  for (const id of ids) await api.waitState(id, ["success"]);

  await page.goto("/instances");
  await expect(page.getByRole("heading", { name: "Instances", level: 1 })).toBeVisible();
  for (const f of ["Workflow", "From", "To"]) await expect(page.getByLabel(f, { exact: true })).toBeVisible();
  await expect(page.getByRole("combobox", { name: "State", exact: true })).toBeVisible();
  await expect(page.getByRole("button", { name: "Previous" })).toBeVisible();
  await expect(page.getByRole("button", { name: "Next" })).toBeVisible();
  await expect(page.getByText(/^\d+–\d+ of \d+$/)).toBeVisible();

  await page.getByLabel("Workflow", { exact: true }).fill(wf);
  const table = page.getByRole("table", { name: "Instances" });
  await expect(page.getByText("1–2 of 2", { exact: true })).toBeVisible();
  await expect.poll(async () => (await readTable(table)).length).toBe(2);
  for (const row of await readTable(table)) expect(Object.values(row).join(" ")).toContain(wf);
  await expect(page.getByRole("button", { name: "Previous" })).toBeDisabled();
  await expect(page.getByRole("button", { name: "Next" })).toBeDisabled();
  await shot("instances");

  await page.getByRole("combobox", { name: "State", exact: true }).selectOption("failure");
  await expect.poll(async () => (await readTable(table)).length).toBe(0);
  await page.getByRole("combobox", { name: "State", exact: true }).selectOption("success");
  await expect.poll(async () => (await readTable(table)).length).toBe(2);

  // A row leads to its instance.
  await table
    .getByRole("link", { name: new RegExp(`\\b${ids[0]}\\b`) })
    .first()
    .click();
  await expect(page).toHaveURL(new RegExp(`/instances/${ids[0]}$`));
  await expect(instanceState(page)).toHaveText("success");
});

test("the instances page pages 50 at a time", async ({ page, api, shot }) => {
  // 51 dry runs of one workflow: two pages when filtered by it.
  const wf = unique("many_runs");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: only, type: noop }\n`);
  const ids: number[] = [];
  for (let i = 0; i < 51; i++) ids.push(await api.start("default", wf, { dry_run: true }));
  for (const id of ids) await api.waitState(id, ["success"]);

  await page.goto(`/instances`);
  await page.getByLabel("Workflow", { exact: true }).fill(wf);
  await expect(page.getByText("1–50 of 51", { exact: true })).toBeVisible();
  const table = page.getByRole("table", { name: "Instances" });
  await expect.poll(async () => (await readTable(table)).length).toBe(50);
  await page.getByRole("button", { name: "Next" }).click();
  await expect(page.getByText("51–51 of 51", { exact: true })).toBeVisible();
  await shot("instances-page-2");
  await expect.poll(async () => (await readTable(table)).length).toBe(1);
  await expect(page.getByRole("button", { name: "Next" })).toBeDisabled();
  await page.getByRole("button", { name: "Previous" }).click();
  await expect(page.getByText("1–50 of 51", { exact: true })).toBeVisible();
});

test("the cluster page lists nodes, external queues, task groups, alert channels and alerts", async ({
  page,
  api,
  shot,
}, testInfo) => {
  const group = unique("tg");
  const channel = unique("ch");
  expect((await api.post("/task-groups", { name: group, slots: 3, description: "e2e group" })).status()).toBe(201);
  expect((await api.post("/alert-channels", { name: channel, type: "log" })).status()).toBe(201);
  try {
    await page.goto("/cluster");
    await expect(page.getByRole("heading", { name: "Cluster", level: 1 })).toBeVisible();
    for (const t of ["Nodes", "External queues", "Task groups", "Alert channels", "Alerts"])
      await expect(page.getByRole("table", { name: t })).toBeVisible();

    const nodes = page.getByRole("table", { name: "Nodes" });
    const workers = testInfo.project.name === "cluster" ? 2 : 1;
    await expect
      .poll(async () => (await readTable(nodes)).filter((r) => Object.values(r).includes("worker")).length)
      .toBe(workers);
    await expect
      .poll(async () => (await readTable(nodes)).filter((r) => Object.values(r).includes("master")).length)
      .toBe(1);
    await expect(
      page.getByRole("table", { name: "Task groups" }).getByRole("row").filter({ hasText: group }),
    ).toContainText("3");
    await expect(
      page.getByRole("table", { name: "Alert channels" }).getByRole("row").filter({ hasText: channel }),
    ).toBeVisible();
    await shot("cluster");
  } finally {
    await api.delete(`/task-groups/${group}`);
    await api.delete(`/alert-channels/${channel}`);
  }
});

test("task groups and alert channels are created and deleted on the cluster page", async ({
  page,
  api,
  consoleErrors,
  shot,
}) => {
  const group = unique("tg");
  const channel = unique("ch");
  const mailChannel = unique("mail");
  await page.goto("/cluster");
  const groups = page.getByRole("table", { name: "Task groups" });
  const channels = page.getByRole("table", { name: "Alert channels" });
  try {
    const newGroup = page.getByRole("form", { name: "New task group" });
    await newGroup.getByLabel("Name").fill(group);
    await newGroup.getByLabel("Slots").fill("2");
    await newGroup.getByLabel("Description").fill("the warehouse's connections");
    await newGroup.getByRole("button", { name: "Create task group" }).click();
    await expect(groups.getByRole("row").filter({ hasText: group })).toContainText("0 / 2");
    expect((await (await api.get("/task-groups")).json()).find((g: { name: string }) => g.name === group)?.slots).toBe(
      2,
    );
    // The name is taken: the server's reason is shown, nothing changes.
    consoleErrors.allow(/status of 409/);
    await newGroup.getByLabel("Name").fill(group);
    await newGroup.getByRole("button", { name: "Create task group" }).click();
    await expect(page.getByRole("alert")).toContainText(group);
    await expect(groups.getByRole("row").filter({ hasText: group })).toHaveCount(1);

    const newChannel = page.getByRole("form", { name: "New alert channel" });
    await newChannel.getByLabel("Name").fill(channel);
    await newChannel.getByLabel("URL").fill("https://hooks.slack.example/T1");
    await newChannel.getByLabel("Format").selectOption("slack");
    await newChannel.getByRole("button", { name: "Create alert channel" }).click();
    const row = channels.getByRole("row").filter({ hasText: channel });
    await expect(row).toContainText("webhook (slack)");
    await expect(row).toContainText("https://hooks.slack.example/T1");

    // An e-mail channel: its server and recipients are shown.
    await newChannel.getByLabel("Name").fill(mailChannel);
    await newChannel.getByLabel("Type").selectOption("email");
    await newChannel.getByLabel("SMTP server").fill("smtps://mail.example.com");
    await newChannel.getByLabel("From").fill("shoal@example.com");
    await newChannel.getByLabel("To (comma-separated)").fill("oncall@example.com, lead@example.com");
    await newChannel.getByRole("button", { name: "Create alert channel" }).click();
    const mailRow = channels.getByRole("row").filter({ hasText: mailChannel });
    await expect(mailRow).toContainText("email");
    await expect(mailRow).toContainText("smtps://mail.example.com → oncall@example.com, lead@example.com");
    await shot("cluster-manage");

    await page.getByRole("button", { name: `Delete task group ${group}` }).click();
    await expect(groups.getByRole("row").filter({ hasText: group })).toHaveCount(0);
    await page.getByRole("button", { name: `Delete alert channel ${channel}` }).click();
    await expect(row).toHaveCount(0);
    expect(
      ((await (await api.get("/alert-channels")).json()) as { name: string }[]).some((c) => c.name === channel),
    ).toBe(false);
  } finally {
    await api.delete(`/task-groups/${group}`);
    await api.delete(`/alert-channels/${channel}`);
    await api.delete(`/alert-channels/${mailChannel}`);
  }
});

test("no console errors on any page", async ({ page, api, shot }) => {
  const wf = unique("toured");
  await api.apply(
    "default",
    `name: ${wf}
params: { who: tour }
tasks:
  - { name: say, type: shell, command: 'echo "hi \${who}"' }
  - { name: end, type: noop, depends_on: [say] }
`,
  );
  const id = await api.start("default", wf);
  await api.waitState(id, ["success"]);
  // Each page, left open long enough for a round of its polling. Its content checks are
  // soft: a page that does not render fails the test, and the tour still goes on.
  const soft = expect.configure({ soft: true });
  const visit = async (path: string, ready: () => Promise<void>, name: string) => {
    await page.goto(path);
    await ready();
    await page.waitForTimeout(1500);
    await shot(`tour-${name}`);
  };
  const heading = (name: string) => () => soft(page.getByRole("heading", { name, level: 1 })).toBeVisible();
  await visit("/", heading("Workflows"), "workflows");
  await visit(
    "/projects/default/workflows/new",
    () => soft(page.getByRole("textbox", { name: "Workflow YAML" })).toBeVisible(),
    "editor-new",
  );
  await visit(`/projects/default/workflows/${wf}`, heading(wf), "workflow");
  await visit(
    `/projects/default/workflows/${wf}/edit`,
    () => soft(page.getByRole("textbox", { name: "Workflow YAML" })).toContainText("say"),
    "editor-edit",
  );
  await visit(
    `/projects/default/workflows/${wf}/schedule`,
    () => soft(page.getByRole("list", { name: "Next fire times" }).getByRole("listitem")).toHaveCount(5),
    "schedule",
  );
  await visit(
    `/projects/default/workflows/${wf}/backfill`,
    () => soft(page.getByRole("button", { name: "Start backfill" })).toBeVisible(),
    "backfill",
  );
  await visit(`/instances/${id}`, () => soft(instanceState(page)).toHaveText("success"), "instance");
  await page.getByRole("table", { name: "Tasks" }).getByRole("button", { name: "say", exact: true }).click();
  await expect(page.getByRole("log", { name: "Log of say" })).toContainText("hi tour");
  await shot("tour-instance-log");
  await visit("/instances", heading("Instances"), "instances");
  await visit("/cluster", heading("Cluster"), "cluster");
  await visit("/no/such/page", heading("Page not found"), "not-found");
});
