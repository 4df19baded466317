// The Schedule and Backfill tabs of a workflow.
import { expect, test, unique, type Api } from "./fixtures";

async function simple(api: Api, prefix: string) {
  const wf = unique(prefix);
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: only, type: shell, command: echo only }\n`);
  return wf;
}

interface Schedule {
  id: number;
  cron: string;
  timezone: string;
  enabled: boolean;
}

test("create a schedule: the next fire times follow what you type; save and delete it", async ({ page, api, shot }) => {
  const wf = await simple(api, "scheduled");
  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("link", { name: "Schedule", exact: true }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/default/workflows/${wf}/schedule$`));

  const cron = page.getByLabel("Cron", { exact: true });
  const zone = page.getByLabel("Timezone", { exact: true });
  const fires = page.getByRole("list", { name: "Next fire times" }).getByRole("listitem");
  await cron.fill("30 2 * * *");
  await zone.fill("Europe/Berlin");
  // Soft: a preview that does not follow fails the test, and the rest still runs.
  const soft = expect.configure({ soft: true });
  const texts = async () => (await fires.allTextContents()).join("|");
  await soft(fires, "5 fire times").toHaveCount(5);
  await soft.poll(texts, "the fire times of 30 2 * * *").toMatch(/30/);
  const before = await texts();
  await cron.fill("15 4 * * *");
  await soft.poll(texts, "the fire times change with the cron").not.toBe(before);
  await soft(fires, "5 fire times").toHaveCount(5);
  await soft.poll(texts, "the fire times of 15 4 * * *").toMatch(/15/);
  await shot("schedule-preview");

  // Create it disabled, so it never fires during the run.
  await page.getByLabel("Enabled", { exact: true }).uncheck();
  await page.getByRole("button", { name: "Create schedule" }).click();
  await expect(page.getByRole("button", { name: "Save schedule" })).toBeVisible();
  await expect(page.getByRole("button", { name: "Delete schedule" })).toBeVisible();
  const stored = await api.json<Schedule[]>(`/projects/default/workflows/${wf}/schedules`);
  expect(stored).toHaveLength(1);
  expect(stored[0]).toMatchObject({ cron: "15 4 * * *", timezone: "Europe/Berlin", enabled: false });
  await shot("schedule-saved");

  // Saving a change replaces it.
  await cron.fill("45 5 * * *");
  await page.getByRole("button", { name: "Save schedule" }).click();
  await expect
    .poll(async () => (await api.json<Schedule[]>(`/projects/default/workflows/${wf}/schedules`))[0]?.cron)
    .toBe("45 5 * * *");

  await page.getByRole("button", { name: "Delete schedule" }).click();
  await expect(page.getByRole("button", { name: "Create schedule" })).toBeVisible();
  await expect
    .poll(async () => (await api.json<Schedule[]>(`/projects/default/workflows/${wf}/schedules`)).length)
    .toBe(0);
});

test("a backfill over three days runs to the end with its progress shown", async ({ page, api, shot }) => {
  const wf = await simple(api, "backfilled");
  await page.goto(`/projects/default/workflows/${wf}`);
  await page.getByRole("link", { name: "Backfill", exact: true }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/default/workflows/${wf}/backfill$`));

  await page.getByLabel("From", { exact: true }).fill("2026-01-01");
  await page.getByLabel("To", { exact: true }).fill("2026-01-03");
  await page.getByLabel("Parallel", { exact: true }).fill("2");
  await page.getByRole("combobox", { name: "Order", exact: true }).selectOption("desc");
  await page.getByLabel("Stop on failure", { exact: true }).check();
  await page.getByRole("button", { name: "Start backfill" }).click();

  const progress = page.getByRole("progressbar").first();
  await expect(progress).toBeVisible();
  const done = () =>
    progress.evaluate((el) => {
      const p = el as HTMLProgressElement;
      const now = el.tagName === "PROGRESS" ? p.value : Number(el.getAttribute("aria-valuenow"));
      const max = el.tagName === "PROGRESS" ? p.max : Number(el.getAttribute("aria-valuemax"));
      return `${now}/${max}`;
    });
  await expect.poll(done, { timeout: 60_000 }).toBe("3/3");
  await shot("backfill-done");

  const list = await api.json<{ id: number; state: string; total: number; succeeded: number }[]>(
    `/backfills?workflow=${wf}&project=default`,
  );
  expect(list).toHaveLength(1);
  expect(list[0]).toMatchObject({ total: 3, succeeded: 3 });
  await expect.poll(async () => (await api.json<{ state: string }>(`/backfills/${list[0].id}`)).state).toBe("success");
  const runs = await api.json<{ schedule_time: string | null }[]>(`/instances?workflow=${wf}&project=default`);
  expect(runs).toHaveLength(3);
});

test("a backfill with dependents names their backfill; a waiting dependent task says what it waits for", async ({
  page,
  api,
  shot,
}) => {
  const up = await simple(api, "upstream");
  const down = unique("downstream");
  await api.apply(
    "default",
    `name: ${down}
tasks:
  - { name: gate, type: dependent, dependent: { workflow: ${up}, check_interval: 500ms } }
  - { name: report, type: noop, depends_on: [gate] }
`,
  );
  await page.goto(`/projects/default/workflows/${up}/backfill`);
  await page.getByLabel("From", { exact: true }).fill("2026-02-01");
  await page.getByLabel("To", { exact: true }).fill("2026-02-02");
  await page.getByLabel("With dependents").check();
  await page.getByRole("button", { name: "Start backfill" }).click();
  const made = page.getByLabel("Dependent backfills");
  await expect(made).toContainText(`2 runs of default/${down}, stage 1`);
  await shot("backfill-with-dependents");

  await made.getByRole("link", { name: `default/${down}` }).click();
  await page.getByRole("link", { name: "Backfill", exact: true }).click();
  const card = page.getByRole("list", { name: "Backfills" }).getByRole("listitem").first();
  await expect(card).toContainText("stage 1 after backfill");
  await expect(card.getByText("success").first()).toBeVisible({ timeout: 60_000 });

  // Started by hand today, when the upstream has no run: the gate's row says so.
  const id = await api.start("default", down);
  await page.goto(`/instances/${id}`);
  const gate = page.getByRole("row").filter({ hasText: "gate" });
  await expect(gate).toContainText(`waiting for default/${up} (today `);
  await expect(gate).toContainText("no run yet");
  await shot("dependent-waiting");
  await api.post(`/instances/${id}/stop`);
  await api.waitState(id, ["stopped"]);
});
