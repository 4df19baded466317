// Start options from the start dialog: a run with its own failure strategy and timeout
// shows them on its instance page; a run at a later time shows on the workflow's Runs tab
// as scheduled and is cancelled there, never running; backfills and schedules take the same
// options on their tabs.
import { expect, instanceIdFromUrl, readTable, test, unique } from "./fixtures";

test("a run's own failure strategy and timeout are set in the start dialog and shown on its page", async ({
  page,
  api,
  shot,
}) => {
  const wf = unique("opts");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: t, type: noop }\n`);
  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("button", { name: "Start", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: `Start ${wf}` });
  await dialog.getByLabel("Failure strategy").selectOption("continue");
  await dialog.getByLabel("Timeout").fill("1h");
  await shot("start-dialog-options");
  await dialog.getByRole("button", { name: "Start run" }).click();
  const id = await instanceIdFromUrl(page);
  await expect(page.getByRole("heading", { name: `Instance ${id}`, level: 1 })).toBeVisible();
  await expect(page.getByLabel("Start options")).toHaveText("Started with failure strategy continue · timeout 1h");
});

test("a run at a later time shows as scheduled and a Cancel removes it before it runs", async ({ page, api, shot }) => {
  const wf = unique("later");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: t, type: noop }\n`);
  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("button", { name: "Start", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: `Start ${wf}` });
  // An hour from now, as the datetime-local input takes it (local time, minutes).
  const later = new Date(Date.now() + 3600_000);
  const local = new Date(later.getTime() - later.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  await dialog.getByLabel("Start at").fill(local);
  await dialog.getByRole("button", { name: "Schedule run" }).click();

  await expect(page).toHaveURL(new RegExp(`/workflows/${wf}/runs$`));
  const table = page.getByRole("table", { name: "Scheduled runs" });
  await expect(table).toBeVisible();
  const rows = await readTable(table);
  expect(rows).toHaveLength(1);
  const command = Number(rows[0].command);
  const pending = await api.json<{ id: number; due_at: string }[]>("/projects/default/commands");
  const mine = pending.find((c) => c.id === command);
  expect(mine, `command ${command} is pending`).toBeTruthy();
  expect(Math.abs(new Date(mine!.due_at).getTime() - later.getTime())).toBeLessThan(60_000);
  await expect(page.getByText("No runs yet.")).toBeVisible();
  await shot("scheduled-run");

  await table.getByRole("button", { name: "Cancel" }).click();
  await expect(table).toBeHidden();
  const status = await api.json<{ status: string; error: string }>(`/commands/${command}`);
  expect(status.status).toBe("error");
  expect(status.error).toContain("cancelled by");
  await expect(page.getByText("No runs yet.")).toBeVisible();
});

test("a backfill's runs take the options set on the Backfill tab", async ({ page, api, shot }) => {
  const wf = unique("bfopts");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: t, type: noop }\n`);
  await page.goto(`/projects/default/workflows/${wf}/backfill`);
  await page.getByLabel("Dates (instead of a range)").fill("2026-01-01");
  const options = page.getByRole("group", { name: "Its runs" });
  await options.getByLabel("Failure strategy").selectOption("continue");
  await options.getByLabel("Timeout").fill("5m");
  await shot("backfill-options");
  await page.getByRole("button", { name: "Start backfill" }).click();
  await expect
    .poll(async () => (await api.json<unknown[]>(`/instances?workflow=${wf}&project=default`)).length)
    .toBe(1);
  const [run] = await api.json<{ id: number }[]>(`/instances?workflow=${wf}&project=default`);
  const inst = await api.json<{ options: Record<string, unknown> }>(`/instances/${run.id}`);
  expect(inst.options).toMatchObject({ failure_strategy: "continue", timeout: "5m" });
});

test("saving a schedule on its tab keeps what the form does not show and its run options", async ({ page, api }) => {
  const wf = unique("schedkeep");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: t, type: noop }\n`);
  const schedules = `/projects/default/workflows/${wf}/schedules`;
  const created = await api.post(schedules, {
    cron: "0 0 3 * * *",
    enabled: false,
    params: { region: "eu" },
    priority: "high",
    misfire: "skip",
    failure_strategy: "continue",
    timeout: "10m",
  });
  expect(created.status()).toBe(201);
  await page.goto(`/projects/default/workflows/${wf}/schedule`);
  const options = page.getByRole("group", { name: "Its runs" });
  await expect(options.getByLabel("Failure strategy")).toHaveValue("continue");
  await expect(options.getByLabel("Timeout")).toHaveValue("10m");
  await options.getByLabel("Failure strategy").selectOption("end");
  await page.getByLabel("Cron", { exact: true }).fill("0 30 3 * * *");
  await page.getByRole("button", { name: "Save schedule" }).click();
  await expect.poll(async () => (await api.json<{ cron: string }[]>(schedules))[0].cron).toBe("0 30 3 * * *");
  const [saved] = await api.json<Record<string, unknown>[]>(schedules);
  expect(saved).toMatchObject({
    params: { region: "eu" },
    priority: "high",
    misfire: "skip",
    failure_strategy: "end",
    timeout: "10m",
  });
});
