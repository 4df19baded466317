// What every spec shares: a `test` that fails on any console error or uncaught page error
// (a test that provokes an HTTP error on purpose allows exactly that message), a small
// REST client for setting up definitions and runs without the UI, named screenshots, and
// helpers for the UI's tables, DAG and instance state.
import { test as base, expect, type APIRequestContext, type Locator, type Page } from "@playwright/test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export { expect };

/** A name no other test or earlier run on the same server uses. */
export function unique(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
}

export interface Instance {
  id: number;
  state: string;
  run: number;
  project: string;
  version: number;
  workflow: string;
  tasks: { id: number; name: string; state: string; attempt: number; run: number }[];
}

/** The REST API under /api/v1 of the project's server (its baseURL). */
export class Api {
  constructor(
    readonly request: APIRequestContext,
    readonly token?: string,
  ) {}

  private headers(extra: Record<string, string> = {}) {
    return this.token ? { Authorization: `Bearer ${this.token}`, ...extra } : extra;
  }

  async get(path: string) {
    return this.request.get(`/api/v1${path}`, { headers: this.headers() });
  }

  async json<T = unknown>(path: string): Promise<T> {
    const res = await this.get(path);
    expect(res.status(), `GET ${path}: ${await res.text()}`).toBe(200);
    return (await res.json()) as T;
  }

  async post(path: string, body?: unknown) {
    return this.request.post(`/api/v1${path}`, { headers: this.headers(), data: body ?? {} });
  }

  async delete(path: string) {
    return this.request.delete(`/api/v1${path}`, { headers: this.headers() });
  }

  /** Stores a definition given as YAML (a new version) through POST /projects/{p}/workflows. */
  async apply(project: string, yaml: string) {
    const res = await this.request.post(`/api/v1/projects/${encodeURIComponent(project)}/workflows`, {
      headers: this.headers({ "Content-Type": "application/yaml" }),
      data: yaml,
    });
    expect(res.status(), `apply: ${await res.text()}`).toBeLessThan(300);
    return (await res.json()) as { name: string; version: number };
  }

  /** Starts a run and returns its instance id once a master has made one. */
  async start(project: string, name: string, body: Record<string, unknown> = {}): Promise<number> {
    const res = await this.post(
      `/projects/${encodeURIComponent(project)}/workflows/${encodeURIComponent(name)}/start`,
      body,
    );
    expect(res.status(), `start: ${await res.text()}`).toBe(202);
    const { command_id } = await res.json();
    let id = 0;
    await expect
      .poll(
        async () => {
          const c = await this.json<{ status: string; workflow_instance_id: number | null; error: string | null }>(
            `/commands/${command_id}`,
          );
          if (c.status === "error") throw new Error(`command ${command_id} failed: ${c.error}`);
          id = c.workflow_instance_id ?? 0;
          return id;
        },
        { message: `command ${command_id} becomes an instance`, timeout: 30_000 },
      )
      .toBeGreaterThan(0);
    return id;
  }

  instance(id: number) {
    return this.json<Instance>(`/instances/${id}`);
  }

  /** Waits until the instance is in one of `states`; returns it. */
  async waitState(id: number, states: string[], timeout = 60_000): Promise<Instance> {
    await expect
      .poll(async () => (await this.instance(id)).state, { message: `instance ${id} ends ${states}`, timeout })
      .toMatch(new RegExp(`^(${states.join("|")})$`));
    return this.instance(id);
  }
}

export interface ConsoleGuard {
  /** Console errors matching `re` (tested against "text @ url") are expected in this test. */
  allow(re: RegExp): void;
  /** The messages collected so far. */
  readonly messages: string[];
}

type Fixtures = {
  /** The project's API token: the REST client sends it and the pages start signed in. */
  token: string | undefined;
  consoleErrors: ConsoleGuard;
  api: Api;
  /** Saves a full-page screenshot as e2e/screenshots/{project}/{name}.png. */
  shot: (name: string) => Promise<void>;
};

export const test = base.extend<Fixtures>({
  token: [undefined, { option: true }],
  page: async ({ page, token }, use) => {
    if (token) await page.addInitScript((t) => sessionStorage.setItem("shoal.token", t), token);
    await use(page);
  },
  consoleErrors: [
    async ({ page }, use) => {
      const messages: string[] = [];
      const allowed: RegExp[] = [];
      const pageErrors: string[] = [];
      page.on("console", (m) => {
        if (m.type() === "error") messages.push(`${m.text()} @ ${m.location().url}`);
      });
      page.on("pageerror", (e) => pageErrors.push(`uncaught: ${e.stack ?? e.message}`));
      await use({
        allow: (re) => allowed.push(re),
        messages,
      });
      const unexpected = [...pageErrors, ...messages.filter((m) => !allowed.some((re) => re.test(m)))];
      expect(unexpected, "console errors and uncaught page errors").toEqual([]);
    },
    { auto: true },
  ],
  api: async ({ request, token }, use) => {
    await use(new Api(request, token));
  },
  shot: async ({ page }, use, testInfo) => {
    const dir = join(testInfo.project.testDir, "screenshots", testInfo.project.name);
    mkdirSync(dir, { recursive: true });
    await use(async (name) => {
      await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
    });
  },
});

/** The DAG drawing of a workflow page ("DAG") or of the editor ("DAG preview"). */
export function dag(page: Page, name = "DAG"): Locator {
  return page.getByRole("region", { name, exact: true });
}

/** A DAG node by its accessible label, e.g. "load: success" or "load (shell)". */
export function node(page: Page, label: string, region = "DAG"): Locator {
  return dag(page, region).getByLabel(label, { exact: true });
}

export function instanceState(page: Page): Locator {
  return page.getByRole("status", { name: "Instance state" });
}

/** A table's body rows as records keyed by lowercased header text. */
export async function readTable(table: Locator): Promise<Record<string, string>[]> {
  return table.evaluate((t) => {
    const heads = [...t.querySelectorAll("thead th")].map((th) => (th.textContent ?? "").trim().toLowerCase());
    return [...t.querySelectorAll("tbody tr")].map((tr) => {
      const row: Record<string, string> = {};
      [...tr.querySelectorAll("td,th")].forEach(
        (td, i) => (row[heads[i] ?? String(i)] = (td.textContent ?? "").trim()),
      );
      return row;
    });
  });
}

/** The header texts of a table, lowercased. */
export async function tableHeaders(table: Locator): Promise<string[]> {
  return table.locator("thead th").evaluateAll((ths) => ths.map((th) => (th.textContent ?? "").trim().toLowerCase()));
}

/** Replaces the text of the CodeMirror editor "Workflow YAML". */
export async function typeYaml(page: Page, yaml: string) {
  const editor = page.getByRole("textbox", { name: "Workflow YAML" });
  await editor.click();
  await page.keyboard.press("ControlOrMeta+a");
  await page.keyboard.insertText(yaml);
}

/** The path of the instance page the browser is on (after "Start run"). */
export async function instanceIdFromUrl(page: Page): Promise<number> {
  await expect(page).toHaveURL(/\/instances\/\d+$/);
  return Number(/\/instances\/(\d+)$/.exec(new URL(page.url()).pathname)![1]);
}
