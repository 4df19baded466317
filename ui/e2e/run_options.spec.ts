// Start options from the start dialog: a run with its own failure strategy and timeout
// shows them on its instance page; a run at a later time shows on the workflow's Runs tab
// as scheduled and is cancelled there, never running.
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
  await expect(page.getByLabel("Start options")).toHaveText("Started with failure strategy continue · timeout 3600s");
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
