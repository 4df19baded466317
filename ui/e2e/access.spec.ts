// Users, tokens, projects, members, secrets and the audit log, against a server with auth
// (project "token": standalone --token). The suite starts signed in with the server's
// SHOAL_TOKEN, a global admin, then signs in as the user it made.
import { expect, test, unique } from "./fixtures";

test.use({ token: process.env.SHOAL_E2E_TOKEN });

test("an admin makes a user, a token and a project; the user sees only that project, as viewer", async ({
  page,
  api,
  consoleErrors,
  shot,
}) => {
  const user = unique("ann");
  const project = unique("sales");

  // A user and a token for them, shown once.
  await page.goto("/users");
  await expect(page.getByRole("heading", { name: "Users", level: 1 })).toBeVisible();
  const newUser = page.getByRole("form", { name: "New user" });
  await newUser.getByLabel("Name").fill(user);
  await newUser.getByRole("button", { name: "Create user" }).click();
  await expect(page.getByRole("table", { name: "Users" }).getByRole("row").filter({ hasText: user })).toContainText(
    "active",
  );
  const newToken = page.getByRole("form", { name: "New token for a user" });
  await expect(newToken.getByLabel("User")).toHaveValue(user);
  await newToken.getByLabel("Token name").fill("laptop");
  await newToken.getByRole("button", { name: "Create token" }).click();
  const shown = page.getByLabel("Token value", { exact: true });
  await expect(shown).toHaveValue(/^shoal_[0-9a-f]{64}$/);
  const token = await shown.inputValue();
  await shot("users");

  // A project, the user a viewer of it, a secret.
  await page.getByRole("link", { name: "Projects", exact: true }).click();
  const form = page.getByRole("form", { name: "New project" });
  await form.getByLabel("Name").fill(project);
  await form.getByLabel("Description").fill("the sales team");
  await form.getByRole("button", { name: "Create project" }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/${project}$`));
  await expect(page.getByRole("heading", { name: project, level: 1 })).toBeVisible();
  const add = page.getByRole("form", { name: "Add member" });
  await add.getByLabel("User").fill(user);
  await add.getByLabel("Role").selectOption("viewer");
  await add.getByRole("button", { name: "Add member" }).click();
  await expect(page.getByLabel(`Role of ${user}`)).toHaveValue("viewer");
  const secret = page.getByRole("form", { name: "Set secret" });
  await secret.getByLabel("Name").fill("warehouse");
  await secret.getByLabel("Value").fill("hunter2-do-not-show");
  await secret.getByLabel("Description").fill("the warehouse");
  await secret.getByRole("button", { name: "Set secret" }).click();
  await expect(page.getByRole("table", { name: "Secrets" })).toContainText("warehouse");
  await expect(page.locator("body")).not.toContainText("hunter2-do-not-show");
  await shot("project-settings");
  await api.apply(project, `name: report\ntasks:\n  - { name: t, type: noop }\n`);

  // The audit log has each change, by the admin.
  await page.getByRole("link", { name: "Audit", exact: true }).click();
  const filters = page.getByRole("form", { name: "Filters" });
  await filters.getByLabel("Project").fill(project);
  await filters.getByRole("button", { name: "Filter" }).click();
  const log = page.getByRole("table", { name: "Audit log" });
  for (const action of ["createProject", "setMember", "setSecret", "applyWorkflow"]) {
    await expect(log.getByRole("row").filter({ hasText: action })).toHaveCount(1);
  }
  // Each row names what it changed, in its Object column: a secret by its name only.
  await expect(log.getByRole("columnheader", { name: "Object" })).toBeVisible();
  for (const [action, object] of [
    ["setMember", `member '${user}' as viewer`],
    ["setSecret", "secret 'warehouse'"],
    ["applyWorkflow", "workflow 'report' version 1"],
  ]) {
    const row = log.getByRole("row").filter({ hasText: action });
    await expect(row.getByRole("cell", { name: object, exact: true })).toBeVisible();
  }
  await expect(log).not.toContainText("hunter2-do-not-show");
  await expect(log).toContainText("SHOAL_TOKEN");
  await shot("audit");

  // A webhook channel, whose URL path is its credential (Slack's are).
  const channel = unique("hook");
  const hook = {
    name: channel,
    type: "webhook",
    url: "https://hooks.slack.example/services/T1/B2/s3cr3t",
    format: "slack",
  };
  expect((await api.post("/alert-channels", hook)).status()).toBe(201);

  // Signed out, then in as the user: one project, read only.
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("Token", { exact: true }).fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("heading", { name: "Workflows", level: 1 })).toBeVisible();
  await expect(page.getByRole("banner").getByRole("link", { name: user })).toBeVisible();
  const nav = page.getByRole("navigation", { name: "Main" });
  await expect(nav.getByRole("link", { name: "Users" })).toHaveCount(0);
  await expect(nav.getByRole("link", { name: "Audit" })).toHaveCount(0);
  // Task groups and alert channels are global admins' to change: listed, not offered.
  await nav.getByRole("link", { name: "Cluster", exact: true }).click();
  await expect(page.getByRole("table", { name: "Task groups" })).toBeVisible();
  await expect(page.getByRole("form", { name: "New task group" })).toHaveCount(0);
  await expect(page.getByRole("form", { name: "New alert channel" })).toHaveCount(0);
  await expect(page.getByRole("button", { name: /^Delete / })).toHaveCount(0);
  const hookRow = page.getByRole("table", { name: "Alert channels" }).getByRole("row").filter({ hasText: channel });
  await expect(hookRow).toContainText("https://hooks.slack.example/***");
  await expect(hookRow).not.toContainText("s3cr3t");
  expect((await api.delete(`/alert-channels/${channel}`)).status()).toBe(200);
  await nav.getByRole("link", { name: "Projects", exact: true }).click();
  const rows = page.getByRole("table", { name: "Projects" }).getByRole("row");
  await expect(rows).toHaveCount(2); // the header and the one project
  await expect(rows.nth(1)).toContainText(project);
  await expect(rows.nth(1)).toContainText("viewer");

  // A viewer may not start a run: the server's reason is shown. (In-app navigation from
  // here on: a page load would sign in again with the suite's token.)
  consoleErrors.allow(/status of 403/);
  await rows.nth(1).getByRole("link", { name: project, exact: true }).click();
  await page.getByRole("row").filter({ hasText: "report" }).getByRole("button", { name: "Start", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: "Start report" });
  await dialog.getByRole("button", { name: "Start run" }).click();
  await expect(dialog.getByRole("alert")).toContainText(
    `user '${user}' needs the operator role in project '${project}' (has viewer)`,
  );

  // Their own tokens: make one, then revoke it.
  await dialog.getByRole("button", { name: "Cancel" }).click();
  await page.getByRole("banner").getByRole("link", { name: user }).click();
  await expect(page.getByText(`Signed in as ${user}.`)).toBeVisible();
  const mine = page.getByRole("form", { name: "New token" });
  await mine.getByLabel("Name").fill("ci");
  await mine.getByLabel("Expires in days").fill("30");
  await mine.getByRole("button", { name: "Create token" }).click();
  await expect(page.getByLabel("Token value", { exact: true })).toHaveValue(/^shoal_/);
  const ci = page.getByRole("table", { name: "Tokens" }).getByRole("row").filter({ hasText: "ci" });
  await expect(ci).toContainText("active");
  await shot("account");
  await ci.getByRole("button", { name: "Revoke" }).click();
  await expect(ci).toContainText("revoked");
});
