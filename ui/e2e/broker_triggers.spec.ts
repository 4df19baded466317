// A broker trigger in the Triggers tab: its consumer's state, what its messages did, and a
// message it could not use listed with the reason. Messages go through the RabbitMQ of the
// machine (127.0.0.1:5672, guest/guest) with amqp-tools' command-line clients.
import { execFileSync } from "node:child_process";
import { expect, test, unique } from "./fixtures";

// No path: the default vhost ("/" would name the empty one).
const AMQP = "amqp://guest:guest@127.0.0.1:5672";

function amqp(tool: string, ...args: string[]) {
  execFileSync(tool, ["--url", AMQP, ...args], { stdio: "pipe" });
}

test("a broker trigger shows its consumer, its counts and the messages it ignored", async ({ page, api, shot }) => {
  const wf = unique("consumed");
  const queue = unique("e2e_orders");
  amqp("amqp-declare-queue", "--queue", queue);
  try {
    await api.apply(
      "default",
      `name: ${wf}
params: { order: none }
triggers:
  - { name: orders, type: amqp, url: 'amqp://127.0.0.1:5672/', queue: ${queue}, params: { order: $.id } }
tasks:
  - { name: record, type: noop }
`,
    );
    await page.goto(`/projects/default/workflows/${wf}/triggers`);
    const card = page.getByRole("region", { name: "Trigger orders" });
    await expect(card).toContainText(`amqp ${queue}`);
    await expect(card.getByLabel("Consumer", { exact: true })).toContainText("consumer connected on", {
      timeout: 30_000,
    });
    await expect(card).toContainText("No ignored messages.");

    amqp("amqp-publish", "--routing-key", queue, "--body", "{not json");
    amqp("amqp-publish", "--routing-key", queue, "--body", '{"id": "o-1"}');

    const ignored = card.getByRole("table", { name: "Ignored messages of orders" });
    await expect(ignored.getByRole("row")).toHaveCount(2, { timeout: 30_000 });
    await expect(ignored.getByRole("row").nth(1)).toContainText("the body is not JSON");
    await expect(ignored.getByRole("row").nth(1)).toContainText("{not json");

    const counts = card.getByRole("definition");
    const count = (outcome: string) => card.locator(".counts div", { hasText: outcome }).getByRole("definition");
    await expect(count("started")).toHaveText("1", { timeout: 30_000 });
    await expect(count("ignored")).toHaveText("1");
    await expect(count("filtered")).toHaveText("0");
    await expect(counts).toHaveCount(5);
    await expect(card.getByLabel("Consumer", { exact: true })).not.toContainText("last message none yet");
    await shot("broker-trigger");
  } finally {
    amqp("amqp-delete-queue", "--queue", queue);
  }
});
