// The web UI's speed, measured in real Chromium against a real `shoal standalone`:
//  - first load: bytes transferred (gzipped as served) for the Workflows page;
//  - a 1,000-task DAG: layout time, and navigation → nodes drawn, on the workflow page
//    and on a live instance page (states coloured); the longest main-thread task while
//    panning it (responsiveness);
//  - the same DAG in the visual editor: navigation → drawn, and the longest main-thread
//    task while panning it, and while selecting a task and editing a field of its form;
//  - 100,000 instances: server-side paging answer time for the first and the last page,
//    and navigation → last page drawn (`--instances 0` leaves this out).
// Medians of --runs runs (default 5). Writes a section into BENCHMARKS.md with --write.
//
//   cargo build --release -p shoal
//   (cd ui && npm ci)   # Playwright; the browser is Debian's chromium
//   node bench/ui/bench.mjs --shoal target/release/shoal --write BENCHMARKS.md
import { spawn, execSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir, cpus } from "node:os";
import { join } from "node:path";

const require = createRequire(new URL("../../ui/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]?.startsWith("--") ? "true" : (all[i + 1] ?? "true")]] : acc), []),
);
const shoal = args.shoal ?? "target/release/shoal";
const runs = Number(args.runs ?? 5);
const instances = Number(args.instances ?? 100_000);
const port = Number(args.port ?? 12390);
const base = `http://127.0.0.1:${port}`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(method, path, body, type = "application/json") {
  const res = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: body === undefined ? {} : { "Content-Type": type },
    body: body === undefined ? undefined : type === "application/json" ? JSON.stringify(body) : body,
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

/** 1,000 noop tasks in 50 layers of 20, each task after two of the layer above. */
function bigDag(n = 1000, width = 20) {
  const lines = ["name: dag1000", "tasks:"];
  for (let i = 0; i < n; i++) {
    const layer = Math.floor(i / width);
    const deps = layer === 0 ? [] : [`t${(layer - 1) * width + (i % width)}`, `t${(layer - 1) * width + ((i + 7) % width)}`];
    lines.push(`  - { name: t${i}, type: noop${deps.length ? `, depends_on: [${[...new Set(deps)].join(", ")}]` : ""} }`);
  }
  return lines.join("\n") + "\n";
}

async function waitForCommand(id) {
  for (;;) {
    const st = await (await api("GET", `/commands/${id}`)).json();
    if (st.status === "done") return st.workflow_instance_id;
    if (st.status === "error") throw new Error(st.error);
    await sleep(50);
  }
}

async function waitForCount(n) {
  for (;;) {
    const res = await api("GET", "/instances?limit=1");
    const total = Number(res.headers.get("x-total-count"));
    process.stderr.write(`\r  instances: ${total}/${n}`);
    if (total >= n) return process.stderr.write("\n");
    await sleep(1000);
  }
}

/** Starts recording the page's longest main-thread task (the Long Tasks API: over 50 ms). */
async function watchLongTasks(page) {
  await page.evaluate(() => {
    window.__longest = 0;
    window.__observer?.disconnect();
    window.__observer = new PerformanceObserver((l) => l.getEntries().forEach((e) => (window.__longest = Math.max(window.__longest, e.duration))));
    window.__observer.observe({ type: "longtask" });
  });
}

const longestTask = (page) => page.evaluate(() => window.__longest);

/** Drags the region named `region` across for a second. */
async function pan(page, region) {
  const box = await page.getByRole("region", { name: region }).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.down();
  for (let s = 0; s < 30; s++) {
    await page.mouse.move(box.x + box.width / 2 + s * 8, box.y + box.height / 2 + s * 5);
    await sleep(33);
  }
  await page.mouse.up();
}

const dir = mkdtempSync(join(tmpdir(), "shoal-ui-bench-"));
const server = spawn(shoal, ["standalone", "--port", String(port), "--data-dir", dir], { stdio: "ignore" });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const results = {};
const record = (name, v) => (results[name] ??= []).push(v);
try {
  for (let i = 0; ; i++) {
    try {
      await api("GET", "/health");
      break;
    } catch {
      if (i > 100) throw new Error("shoal standalone did not start");
      await sleep(100);
    }
  }
  await api("POST", "/projects/default/workflows", bigDag(), "application/yaml");
  const { command_id } = await (await api("POST", "/projects/default/workflows/dag1000/start", { dry_run: true })).json();
  const bigInstance = await waitForCommand(command_id);

  for (let r = 0; r < runs; r++) {
    // A fresh context each run: nothing cached.
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await ctx.newPage();
    let bytes = 0;
    const cdp = await ctx.newCDPSession(page);
    await cdp.send("Network.enable");
    cdp.on("Network.loadingFinished", (e) => (bytes += e.encodedDataLength));
    await page.goto(`${base}/projects/default/workflows`);
    await page.getByRole("heading", { name: "Workflows" }).waitFor();
    await page.waitForLoadState("networkidle");
    record("first load (KB transferred)", bytes / 1024);

    for (const [name, url, label] of [
      ["workflow page", `${base}/projects/default/workflows/dag1000`, "t0 (noop)"],
      ["instance page", `${base}/instances/${bigInstance}`, "t0: success"],
    ]) {
      const t0 = Date.now();
      await page.goto(url);
      // A plain selector checked every frame: Playwright's label locator costs ~1 s of
      // main thread itself on a page of a thousand labelled nodes.
      await page.waitForFunction((l) => document.querySelector(`[aria-label="${l}"]`) !== null, label, { polling: "raf" });
      record(`1,000-task DAG, ${name}: navigation → drawn (ms)`, Date.now() - t0);
      const layout = await page.evaluate(() => performance.getEntriesByName("dag-layout").map((e) => e.duration).pop());
      record(`1,000-task DAG, ${name}: layout (ms)`, layout);
      // Responsiveness: the longest main-thread task while the DAG is panned for a second.
      await watchLongTasks(page);
      await pan(page, "DAG");
      record(`1,000-task DAG, ${name}: longest main-thread task over 50 ms while panning (ms, 0 = none)`, await longestTask(page));
    }

    // The visual editor on the same DAG: open it, pan, select a task, edit a field.
    const t0 = Date.now();
    await page.goto(`${base}/projects/default/workflows/dag1000/edit?view=visual`);
    await page.waitForFunction(() => document.querySelector('[aria-label="t0 (noop)"]') !== null, null, { polling: "raf" });
    record("1,000-task DAG, visual editor: navigation → drawn (ms)", Date.now() - t0);
    await page.getByText("Valid: 1000 tasks").waitFor();
    await watchLongTasks(page);
    await pan(page, "Workflow canvas");
    record("1,000-task DAG, visual editor: longest main-thread task over 50 ms while panning (ms, 0 = none)", await longestTask(page));
    await watchLongTasks(page);
    await page.locator('[aria-label="t0 (noop)"]').click();
    // CSS, not a role locator: those cost the page's main thread themselves (see above).
    const retries = page.locator('form[aria-label="Task t0"] input[name="retries"]');
    await retries.fill(String(r + 1));
    await retries.press("Enter");
    // The edit is made once Undo can take it back; then the page validates the new text
    // (after a 400 ms pause) and draws the answer.
    await page.waitForFunction(() => document.querySelector('button[aria-keyshortcuts="Control+Z"]')?.disabled === false, null, { polling: "raf" });
    await sleep(1500);
    await page.waitForFunction(() => document.querySelector('[role="status"]')?.textContent?.startsWith("Valid: 1000 tasks"));
    record("1,000-task DAG, visual editor: longest main-thread task over 50 ms while selecting a task and editing a field (ms, 0 = none)", await longestTask(page));
    await ctx.close();
  }

  // 100,000 instances through the real start path (dry runs of a one-task workflow).
  if (instances > 0) {
  await api("POST", "/projects/default/workflows", "name: one\ntasks:\n  - { name: a, type: noop }\n", "application/yaml");
  const have = Number((await api("GET", "/instances?limit=1")).headers.get("x-total-count"));
  const todo = Math.max(0, instances - have);
  process.stderr.write(`starting ${todo} dry runs\n`);
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < todo) {
        next++;
        await api("POST", "/projects/default/workflows/one/start", { dry_run: true });
      }
    }),
  );
  await waitForCount(instances);
  const total = Number((await api("GET", "/instances?limit=1")).headers.get("x-total-count"));
  for (let r = 0; r < runs; r++) {
    for (const [name, offset] of [
      ["first page", 0],
      ["last page", total - 50],
    ]) {
      const t0 = performance.now();
      await (await api("GET", `/instances?limit=50&offset=${offset}`)).json();
      record(`${total.toLocaleString("en")} instances, API ${name} of 50 (ms)`, performance.now() - t0);
    }
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await ctx.newPage();
    const t0 = Date.now();
    await page.goto(`${base}/instances?offset=${total - 50}`);
    await page.getByText(`${total - 49}–${total} of ${total}`).waitFor();
    record(`${total.toLocaleString("en")} instances, UI last page: navigation → drawn (ms)`, Date.now() - t0);
    await ctx.close();
  }
  }
} finally {
  await browser.close();
  server.kill("SIGTERM");
  await sleep(500);
  rmSync(dir, { recursive: true, force: true });
}

const commit = execSync("git rev-parse --short HEAD").toString().trim();
const rows = Object.entries(results).map(([k, v]) => `| ${k} | ${median(v).toFixed(0)} | ${Math.min(...v).toFixed(0)} | ${Math.max(...v).toFixed(0)} | ${v.length} |`);
const section = [
  "<!-- bench:ui:start -->",
  "## web UI",
  "",
  `- date: ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC`,
  `- machine: ${cpus().length} CPUs, ${cpus()[0]?.model.trim()}; Chromium ${browser.version()} headless`,
  `- commit: ${commit}`,
  "- reproduce: `cargo build --release -p shoal && (cd ui && npm ci) && node bench/ui/bench.mjs --shoal target/release/shoal --write BENCHMARKS.md`",
  "- targets: a 1,000-task DAG drawn within 2,000 ms, and edited in the visual editor with no main-thread task over 100 ms; first load < 500 KB transferred; 100,000 instances paged by the server",
  "",
  "| measurement | median | min | max | runs |",
  "|---|--:|--:|--:|--:|",
  ...rows,
  "<!-- bench:ui:end -->",
].join("\n");
console.log(section);
if (args.write) {
  const file = args.write;
  const text = readFileSync(file, "utf8");
  const re = /<!-- bench:ui:start -->[\s\S]*<!-- bench:ui:end -->/;
  writeFileSync(file, re.test(text) ? text.replace(re, section) : `${text.trimEnd()}\n\n${section}\n`);
}
