// A form trigger's page in a browser with JavaScript off: labels name the fields, a submit
// with a required field left empty shows the error beside it (and starts nothing), a
// complete one starts the run with the fields as parameters and links to it.
import { join } from "node:path";
import { mkdirSync } from "node:fs";
import { expect, test, unique } from "./fixtures";

test("a form is filled in and submitted without JavaScript and starts a run", async ({
  browser,
  api,
  token,
}, testInfo) => {
  const wf = unique("refund");
  await api.apply(
    "default",
    `name: ${wf}
params: { order: "", amount: "0", day: "", reason: "" }
triggers:
  - name: request
    type: form
    fields:
      - { name: order, label: Order number, required: true }
      - { name: amount, type: number, required: true }
      - { name: day, label: Day of purchase, type: date }
      - { name: reason, type: select, options: [damaged, late, other] }
tasks:
  - { name: t, type: noop }
`,
  );
  // A members form: a browser signs in with HTTP Basic, the user's token as the password.
  const context = await browser.newContext({
    baseURL: testInfo.project.use.baseURL,
    javaScriptEnabled: false,
    httpCredentials: token ? { username: "admin", password: token } : undefined,
  });
  const page = await context.newPage();
  const shots = join(testInfo.project.testDir, "screenshots", testInfo.project.name);
  mkdirSync(shots, { recursive: true });
  try {
    await page.goto(`/forms/default/${wf}/request`);
    await expect(page.getByRole("heading", { level: 1 })).toHaveText(`${wf} · request`);

    await page.getByLabel("Order number").fill("A-17");
    await page.getByLabel("Day of purchase").fill("2026-11-02");
    await page.getByRole("button", { name: "Start" }).click();

    const amount = page.getByLabel("amount");
    await expect(amount).toHaveAttribute("aria-invalid", "true");
    await expect(amount).toHaveAccessibleDescription("amount is required.");
    await expect(page.getByRole("alert")).toContainText("Nothing was started: 1 field to correct");
    await expect(page.getByLabel("Order number")).toHaveValue("A-17");
    await page.screenshot({ path: join(shots, "form-refused.png"), fullPage: true });

    await amount.fill("12.5");
    await page.getByLabel("reason").selectOption("late");
    await page.getByRole("button", { name: "Start" }).click();
    const status = page.getByRole("status");
    await expect(status).toContainText(/Run started: workflow instance \d+\./);
    const id = Number((await status.textContent())!.match(/instance (\d+)/)![1]);
    await expect(page.getByRole("link", { name: `See run ${id} in shoal` })).toHaveAttribute(
      "href",
      `/instances/${id}`,
    );
    await page.screenshot({ path: join(shots, "form-started.png"), fullPage: true });

    const run = await api.waitState(id, ["success"]);
    const detail = await api.json<{ params: Record<string, string> }>(`/instances/${run.id}`);
    expect(detail.params).toEqual({ order: "A-17", amount: "12.5", day: "2026-11-02", reason: "late" });
  } finally {
    await context.close();
  }
});
