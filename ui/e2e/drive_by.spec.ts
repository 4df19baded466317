// A web page of another site, opened in the browser of someone running `shoal standalone`
// without auth (issue 30, finding 3), tries what it can: "simple" cross-origin requests
// (a workflow POSTed as text/plain, a start with an empty body), a JSON request, reads;
// and DNS rebinding, where its own name now resolves to 127.0.0.1 and its requests are
// same-origin (chromium maps rebind.test to 127.0.0.1, see playwright.config.ts). It can
// neither apply, nor start, nor read. Runs against the standalone project (no auth).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test, unique } from "./fixtures";

/** A page of another origin (another port of 127.0.0.1); closed when the test ends. */
async function hostileOrigin(): Promise<{ url: string; close: () => void }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end("<!doctype html><title>cat pictures</title><p>Nothing to see here.</p>");
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, close: () => server.close() };
}

/** What the page's script gets from each attempt: a status it could read, or why not. */
type Outcome = Record<string, string>;

test("a page of another site can neither apply, nor start, nor read", async ({ page, api, baseURL, consoleErrors }) => {
  consoleErrors.allow(/CORS policy|Failed to load resource|net::ERR_FAILED/);
  const victim = unique("victim");
  await api.apply("default", `name: ${victim}\ntasks:\n  - { name: a, type: shell, command: 'echo started' }\n`);
  const planted = unique("planted");
  const yaml = `name: ${planted}\ntasks:\n  - { name: a, type: shell, command: id }\n`;

  const hostile = await hostileOrigin();
  try {
    await page.goto(hostile.url);
    const outcome: Outcome = await page.evaluate(
      async ({ target, victim, yaml }) => {
        const out: Record<string, string> = {};
        const attempt = async (name: string, run: () => Promise<Response>) => {
          try {
            const res = await run();
            out[name] = res.type === "opaque" ? "sent, answer unreadable" : `read ${res.status}: ${await res.text()}`;
          } catch (e) {
            out[name] = `blocked: ${e}`;
          }
        };
        const apply = `${target}/api/v1/projects/default/workflows`;
        const start = `${target}/api/v1/projects/default/workflows/${victim}/start`;
        // "Simple" requests: the browser sends them without asking the server first.
        await attempt("apply as text/plain", () =>
          fetch(apply, { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: yaml }),
        );
        await attempt("start with an empty body", () => fetch(start, { method: "POST", mode: "no-cors" }));
        // Anything else needs a preflight the server does not grant.
        await attempt("apply as YAML", () =>
          fetch(apply, { method: "POST", headers: { "Content-Type": "application/yaml" }, body: yaml }),
        );
        await attempt("read the projects", () => fetch(`${target}/api/v1/projects`));
        return out;
      },
      { target: baseURL!, victim, yaml },
    );
    expect(outcome["apply as text/plain"]).toBe("sent, answer unreadable");
    expect(outcome["start with an empty body"]).toBe("sent, answer unreadable");
    expect(outcome["apply as YAML"]).toMatch(/^blocked/);
    expect(outcome["read the projects"]).toMatch(/^blocked/);
  } finally {
    hostile.close();
  }

  // DNS rebinding: the page's own name now points at shoal, so its requests are
  // same-origin; shoal refuses the name, reads included.
  const rebound = `http://rebind.test:${new URL(baseURL!).port}`;
  const landing = await page.goto(`${rebound}/`);
  expect(landing?.status()).toBe(403);
  const sameOrigin: Outcome = await page.evaluate(async (yaml) => {
    const read = await fetch("/api/v1/projects");
    const write = await fetch("/api/v1/projects/default/workflows", {
      method: "POST",
      headers: { "Content-Type": "application/yaml" },
      body: yaml,
    });
    return { read: `${read.status} ${await read.text()}`, write: `${write.status} ${await write.text()}` };
  }, yaml);
  expect(sameOrigin.read).toMatch(/^403 .*--allowed-host rebind\.test/);
  expect(sameOrigin.write).toMatch(/^403 /);

  // Nothing was applied, and the victim ran only when started here.
  expect((await api.get(`/projects/default/workflows/${planted}`)).status()).toBe(404);
  const mine = await api.start("default", victim);
  const runs = await api.json<{ id: number }[]>(`/instances?project=default&workflow=${victim}`);
  expect(runs.map((r) => r.id)).toEqual([mine]);
});
