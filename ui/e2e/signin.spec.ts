// Sign-in against a server started with --token, over HTTPS (project "token" only).
import { expect, test } from "./fixtures";

test("sign in with the server's token; a wrong one is refused", async ({ page, consoleErrors, shot }) => {
  // Without the token the server answers 401; the browser logs those responses.
  consoleErrors.allow(/status of 401/);
  const token = process.env.SHOAL_E2E_TOKEN;
  expect(token, "the config sets SHOAL_E2E_TOKEN").toBeTruthy();

  await page.goto("/");
  expect(page.url(), "this server serves HTTPS (--https-cert)").toMatch(/^https:\/\//);
  await expect(page.getByRole("heading", { name: "Sign in" })).toBeVisible();
  const input = page.getByLabel("Token", { exact: true });
  await expect(input).toHaveAttribute("type", "password");
  await shot("sign-in");

  await input.fill(`${token}-wrong`);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toContainText("refused");
  await expect(page.getByRole("heading", { name: "Sign in" })).toBeVisible();

  await input.fill(token!);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("heading", { name: "Workflows", level: 1 })).toBeVisible();
  await expect(page.getByRole("heading", { name: "Sign in" })).toHaveCount(0);

  // Reads need the token too; the tab keeps it across pages and reloads.
  await page.getByRole("link", { name: "Instances", exact: true }).click();
  await page.reload();
  await expect(page.getByRole("heading", { name: "Instances", level: 1 })).toBeVisible();
  await expect(page.getByText(/^\d+–\d+ of \d+$/)).toBeVisible();
  await expect(page.getByRole("heading", { name: "Sign in" })).toHaveCount(0);
});

test("a request refused for its token returns to sign-in", async ({ page, request, consoleErrors }) => {
  consoleErrors.allow(/status of 401/);
  expect((await request.get("/api/v1/instances")).status(), "reads need the token").toBe(401);
  await page.goto("/");
  await page.evaluate(() => sessionStorage.setItem("shoal.token", "revoked"));
  await page.goto("/instances");
  await expect(page.getByRole("heading", { name: "Sign in" })).toBeVisible();
});
