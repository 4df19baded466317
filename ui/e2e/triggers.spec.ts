// A workflow's webhook triggers from the browser: the URL shown, a call with a wrong
// token refused, a sync call that answers with the run's state and outputs.
import { expect, test, unique } from "./fixtures";

test("a trigger's URL is shown and its form calls it with the trigger's own token", async ({
  page,
  api,
  consoleErrors,
  shot,
}) => {
  const wf = unique("hooked");
  await api.apply(
    "default",
    `name: ${wf}
params: { env: dev }
triggers:
  - { name: deploy, mode: sync, auth: { token: hook-secret-0123456789 },
      params: { env: "$.target.env" }, outputs: [deployed_to] }
tasks:
  - name: go
    type: shell
    command: |
      g=\${env}
      echo '\${setValue(deployed_to='"$g"')}'
`,
  );
  await page.goto(`/projects/default/workflows/${wf}/triggers`);
  const card = page.getByRole("region", { name: "Trigger deploy" });
  await expect(card.locator(".trigger-url")).toHaveText(
    new RegExp(`POST http://.+/api/v1/hooks/default/${wf}/deploy$`),
  );
  await expect(card).toContainText("env ← $.target.env");

  consoleErrors.allow(/status of 401/);
  await card.getByLabel("Token").fill("wrong");
  await card.getByRole("button", { name: "Call" }).click();
  await expect(card.getByRole("region", { name: "Answer of deploy" })).toContainText("HTTP 401");

  await card.getByLabel("Token").fill("hook-secret-0123456789");
  await card.getByLabel("Payload (JSON)").fill('{"target": {"env": "prod"}}');
  await card.getByRole("button", { name: "Call" }).click();
  const answer = card.getByRole("region", { name: "Answer of deploy" });
  await expect(answer).toContainText("HTTP 200", { timeout: 30_000 });
  await expect(answer).toContainText('"state": "success"');
  await expect(answer).toContainText('"deployed_to": "prod"');
  await shot("trigger-called");
});
