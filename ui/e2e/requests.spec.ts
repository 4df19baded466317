// What the pages ask the server: one request per query however many components show its
// answer (the query cache of src/api/cache.ts), and path parameters percent-encoded.
import type { Page, Request } from "@playwright/test";
import { expect, test } from "./fixtures";

/** The requests the page makes to `path` (a path under /api/v1, without the query). */
function requestsTo(page: Page, path: string): Request[] {
  const seen: Request[] = [];
  page.on("request", (r) => {
    if (new URL(r.url()).pathname === `/api/v1${path}`) seen.push(r);
  });
  return seen;
}

test("a page load fetches the session once, not once per component that shows it", async ({ page }) => {
  const sessions = requestsTo(page, "/session");
  const cluster = requestsTo(page, "/cluster");
  // The cluster page: the app, the nav, the account corner and the page read the session.
  await page.goto("/cluster");
  await expect(page.getByRole("table", { name: "Nodes" }).getByRole("row")).not.toHaveCount(1);
  // The nodes are polled every 2 s: a second read of them is a moment after every mount.
  await expect.poll(() => cluster.length, { timeout: 10_000 }).toBeGreaterThan(1);
  expect(sessions.length, "GET /api/v1/session on /cluster").toBe(1);

  sessions.length = 0;
  await page.goto("/projects/default/workflows");
  await expect(page.getByRole("heading", { name: "Workflows", level: 1 })).toBeVisible();
  await expect(page.getByRole("combobox", { name: "Project", exact: true })).toHaveValue("default");
  await page.waitForLoadState("networkidle");
  expect(sessions.length, "GET /api/v1/session on the workflows page").toBe(1);
});

test("names in request paths are percent-encoded", async ({ page, consoleErrors }) => {
  // No such project: the API answers 404 naming it, which the page reports.
  consoleErrors.allow(/status of 404/);
  const name = "a b?c/d#é";
  const seen: string[] = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith("/api/v1/projects/")) seen.push(path);
  });
  await page.goto(`/projects/${encodeURIComponent(name)}/workflows`);
  await expect(page.getByRole("combobox", { name: "Project", exact: true })).toHaveValue(name);
  await expect.poll(() => seen).toContain(`/api/v1/projects/${encodeURIComponent(name)}/workflows`);
});
