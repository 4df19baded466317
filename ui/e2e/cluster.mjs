#!/usr/bin/env node
// A shoal cluster of separate processes for the browser suite: a fresh Postgres database,
// its own etcd on free ports, `shoal api-server` on --port, one `shoal master` and two
// `shoal worker`s (as docs/reference.md "A cluster on one machine" and tests/support/mod.rs).
//
//   node e2e/cluster.mjs --port 18081 [--database-url postgres://postgres@127.0.0.1:5432/postgres]
//
// Prints "shoal cluster ready at URL" once GET /api/v1/cluster lists the master and both
// workers. On SIGTERM, Ctrl-C or an error it stops every process, drops the database and
// removes its temporary directories. Databases it left behind earlier (named
// shoal_e2e_<pid>_<ms>, whose launcher pid is gone) are dropped at start.
import { execFileSync } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { SHOAL, Supervisor, flags, getJson, healthy, log } from "./procs.mjs";

const opts = flags();
if (!opts.port) throw new Error("usage: cluster.mjs --port P [--database-url ADMIN_URL]");
const admin = opts["database-url"] ?? process.env.SHOAL_E2E_PG ?? "postgres://postgres@127.0.0.1:5432/postgres";
const WORKERS = 2;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function freePorts(n) {
  const out = new Set();
  while (out.size < n) out.add(await freePort());
  return [...out].map(String);
}

function psql(db, sql) {
  return execFileSync("psql", [db, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

const sup = new Supervisor("cluster");
const dbUrl = (name) => admin.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);

// Databases of launchers that died without cleaning up.
for (const stale of psql(admin, "SELECT datname FROM pg_database WHERE datname LIKE 'shoal_e2e_%'")
  .split("\n")
  .filter(Boolean)) {
  const pid = Number(/^shoal_e2e_(\d+)_/.exec(stale)?.[1]);
  if (pid && !alive(pid)) {
    log("cluster", `dropping database ${stale} left by a launcher that is gone`);
    psql(admin, `DROP DATABASE IF EXISTS ${stale} WITH (FORCE)`);
  }
}

const db = `shoal_e2e_${process.pid}_${Date.now()}`;
psql(admin, `CREATE DATABASE ${db}`);
sup.onCleanup(() => psql(admin, `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`));

const [etcdClient, etcdPeer, masterPort, ...workerPorts] = await freePorts(3 + WORKERS);
const etcd = `http://127.0.0.1:${etcdClient}`;
const peer = `http://127.0.0.1:${etcdPeer}`;
sup.spawn("etcd", "etcd", [
  "--name",
  "e2e",
  "--data-dir",
  join(sup.dir, "etcd"),
  "--listen-client-urls",
  etcd,
  "--advertise-client-urls",
  etcd,
  "--listen-peer-urls",
  peer,
  "--initial-advertise-peer-urls",
  peer,
  "--initial-cluster",
  `e2e=${peer}`,
]);
await sup.waitFor("etcd", () => healthy(`${etcd}/health`));

// Masters and workers bind 0.0.0.0, as in production: they need the cluster secret.
const env = {
  SHOAL_DATABASE_URL: dbUrl(db),
  SHOAL_ETCD: etcd,
  SHOAL_LEASE_TTL: "5",
  SHOAL_CLUSTER_SECRET: `e2e-${process.pid}-${Date.now()}-cluster-secret`,
};
const api = `http://127.0.0.1:${opts.port}`;
// A cluster's API always needs a token: the suite's is the admin token (SHOAL_TOKEN).
const token = process.env.SHOAL_E2E_TOKEN;
if (!token) throw new Error("set SHOAL_E2E_TOKEN, the api-server's admin token");
sup.spawn("api-server", SHOAL, ["api-server", "--port", opts.port, "--bind", "127.0.0.1"], {
  ...env,
  SHOAL_TOKEN: token,
});
await sup.waitFor("the api-server", () => healthy(`${api}/api/v1/health`));
sup.spawn("master", SHOAL, ["master", "--port", masterPort, "--metrics-port", "0"], env);
workerPorts.forEach((port, i) =>
  sup.spawn(
    `worker${i + 1}`,
    SHOAL,
    [
      // --single-team: tasks run as the suite's own user (no tenants here).
      "worker",
      "--port",
      port,
      "--metrics-port",
      "0",
      "--slots",
      "8",
      "--data-dir",
      join(sup.dir, `worker${i + 1}`),
      "--single-team",
    ],
    env,
  ),
);

await sup.waitFor("the master and both workers in GET /api/v1/cluster", async () => {
  const nodes = await getJson(`${api}/api/v1/cluster`, token);
  const count = (role) => nodes.filter((n) => n.role === role).length;
  return count("master") >= 1 && count("worker") >= WORKERS;
});
log("cluster", `database ${db}, etcd ${etcd}, logs in ${sup.logDir}`);
console.log(`shoal cluster ready at ${api}`);
