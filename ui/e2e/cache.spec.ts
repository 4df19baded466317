// The query cache follows writes: a workflow taken offline on its page is offline on the
// workflows list the moment the list is shown again (client-side, no reload), because the
// write refetched the cached list, not because the list fetched it again on mount (that
// fetch is held back here).
import { expect, test, unique } from "./fixtures";

test("a workflow taken offline is offline on the cached workflows list at once", async ({ page, api, shot }) => {
  const wf = unique("cached");
  await api.apply("default", `name: ${wf}\ntasks:\n  - { name: a, type: shell, command: 'echo one' }\n`);
  await page.goto("/projects/default/workflows");
  const row = page.getByRole("row").filter({ has: page.getByRole("link", { name: wf, exact: true }) });
  await expect(row).toBeVisible();
  await expect(row).not.toContainText("offline");
  // Marks this document: a reload would lose it.
  await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));

  await row.getByRole("link", { name: wf, exact: true }).click();
  await expect(page.locator(".pagehead")).toContainText("v1");
  const isList = (url: URL) => url.pathname === "/api/v1/projects/default/workflows";
  const listRefetched = page.waitForResponse((r) => isList(new URL(r.url())) && r.request().method() === "GET");
  await page.getByRole("button", { name: "Take offline" }).click();
  await expect(page.getByLabel("Release state")).toHaveText("offline");
  // The list is not shown, yet the write fetched it again.
  await listRefetched;

  // From now on the list's own fetches take 5 s: what it shows at first is the cache's.
  await page.route(isList, async (route) => {
    await new Promise((r) => setTimeout(r, 5000));
    await route.fallback().catch(() => undefined);
  });
  await page.locator(".crumbs").getByRole("link", { name: "default" }).click();
  await expect(page).toHaveURL(/\/projects\/default\/workflows$/);
  await expect(row).toContainText("offline", { timeout: 2000 });
  await expect(row.getByRole("button", { name: "Start" })).toBeDisabled({ timeout: 2000 });
  expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
  await shot("workflows-list-after-offline");
  await page.unrouteAll({ behavior: "ignoreErrors" });
});
