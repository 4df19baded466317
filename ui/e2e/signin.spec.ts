// Sign-in against a server started with --token (project "token" only).
import { expect, test } from "./fixtures";

test("sign in with the server's token; a wrong one is refused", async ({ page, consoleErrors, shot }) => {
  // Without the token the server answers 401; the browser logs those responses.
  consoleErrors.allow(/status of 401/);
  const token = process.env.SHOAL_E2E_TOKEN;
  expect(token, "the config sets SHOAL_E2E_TOKEN").toBeTruthy();

  await page.goto("/");
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
});
