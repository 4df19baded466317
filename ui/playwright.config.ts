// The browser suite of shoal's web UI (ui/e2e). The same specs run against a `shoal
// standalone` (project "standalone") and a cluster of separate processes (project
// "cluster": Postgres, etcd, api-server, a master, two workers); the sign-in and access
// specs run against a standalone started with --token that serves HTTPS with a
// self-signed certificate, which the browser is told to accept (project "token"). The servers run the
// already-built ../target/debug/shoal (or $SHOAL_BIN), which embeds the committed
// ui/dist bundle: `cargo build -p shoal` after changing the UI and rebuilding the bundle.
//
//   npx playwright test                       # all three projects
//   npx playwright test --project standalone  # only the servers a project needs start
//
// Logs of the servers: $SHOAL_E2E_LOG_DIR/<server>/ when set (scripts/test sets
// target/e2e-logs), else a temporary directory removed on exit.
import { defineConfig, devices } from "@playwright/test";
import { execFileSync } from "node:child_process";

// Ports are chosen once, in the runner process, and handed to the worker processes
// (which load this file again) through the environment they inherit.
if (!process.env.SHOAL_E2E_PORTS) {
  const script = [
    "const n=require('net');const out=new Set();(async()=>{while(out.size<3){out.add(await new Promise((r,j)=>{",
    "const s=n.createServer();s.on('error',j);s.listen(0,'127.0.0.1',()=>{const p=s.address().port;s.close(()=>r(p))})",
    "}))}console.log([...out].join(','))})()",
  ].join("");
  process.env.SHOAL_E2E_PORTS = execFileSync(process.execPath, ["-e", script], { encoding: "utf8" }).trim();
  process.env.SHOAL_E2E_TOKEN ??= `e2e-${Math.random().toString(36).slice(2)}`;
}
const [standalonePort, clusterPort, tokenPort] = process.env.SHOAL_E2E_PORTS.split(",");
const TOKEN = process.env.SHOAL_E2E_TOKEN!; // the sign-in spec reads it from the environment too

// Only the servers of the selected projects start (`--project X`, `--project=X`, globs).
const selected: string[] = [];
process.argv.forEach((a, i) => {
  if (a === "--project" && process.argv[i + 1]) selected.push(process.argv[i + 1]);
  else if (a.startsWith("--project=")) selected.push(a.slice("--project=".length));
});
const wanted = (project: string) =>
  selected.length === 0 ||
  selected.some((p) =>
    new RegExp(`^${p.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*")}$`, "i").test(project),
  );

const chromium = {
  ...devices["Desktop Chrome"],
  viewport: { width: 1400, height: 900 },
  launchOptions: {
    executablePath: process.env.SHOAL_E2E_CHROMIUM ?? "/usr/bin/chromium",
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      // The DNS-rebinding page of drive_by.spec.ts: a name of its own that resolves to shoal.
      "--host-resolver-rules=MAP rebind.test 127.0.0.1",
    ],
  },
};

const server = (name: string, command: string, url: string, timeout: number) => ({
  name,
  command,
  url: `${url}/api/v1/health`,
  ignoreHTTPSErrors: true,
  // The launcher prints this once the server can run tasks (for the cluster: once the
  // master and both workers are registered), not merely when the API answers.
  wait: { stdout: new RegExp(`shoal ${name} ready at`) },
  timeout,
  reuseExistingServer: false,
  gracefulShutdown: { signal: "SIGTERM" as const, timeout: 20_000 },
  stdout: "ignore" as const,
  stderr: "pipe" as const,
});

const standaloneUrl = `http://127.0.0.1:${standalonePort}`;
const clusterUrl = `http://127.0.0.1:${clusterPort}`;
const tokenUrl = `https://127.0.0.1:${tokenPort}`;
const webServer = [];
if (wanted("standalone"))
  webServer.push(server("standalone", `node e2e/standalone.mjs --port ${standalonePort}`, standaloneUrl, 60_000));
if (wanted("cluster"))
  webServer.push(server("cluster", `node e2e/cluster.mjs --port ${clusterPort}`, clusterUrl, 120_000));
if (wanted("token"))
  webServer.push(
    server(
      "token",
      `node e2e/standalone.mjs --name token --port ${tokenPort} --token ${TOKEN} --https`,
      tokenUrl,
      60_000,
    ),
  );

export default defineConfig<{ token?: string }>({
  testDir: "e2e",
  outputDir: "test-results",
  fullyParallel: true,
  workers: 2,
  retries: 0,
  forbidOnly: !!process.env.CI,
  reporter: "list",
  timeout: 90_000,
  expect: { timeout: 15_000 },
  use: {
    ...chromium,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    actionTimeout: 15_000,
    navigationTimeout: 30_000,
  },
  projects: [
    { name: "standalone", testIgnore: /(signin|access)\.spec\.ts/, use: { baseURL: standaloneUrl } },
    // drive_by needs a server without auth: the standalone one.
    { name: "cluster", testIgnore: /(signin|access|drive_by)\.spec\.ts/, use: { baseURL: clusterUrl, token: TOKEN } },
    { name: "token", testMatch: /(signin|access)\.spec\.ts/, use: { baseURL: tokenUrl, ignoreHTTPSErrors: true } },
  ],
  webServer,
});
