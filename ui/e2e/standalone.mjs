#!/usr/bin/env node
// `shoal standalone` for the browser suite, on a fresh data dir that is removed on exit.
//
//   node e2e/standalone.mjs --port 18080 [--token SECRET] [--name standalone] [--https]
//
// With --https it serves HTTPS with a self-signed certificate made for the run. Prints
// "shoal standalone ready at URL" once /api/v1/health answers; SIGTERM or Ctrl-C stops it
// and removes its data.
import { join } from "node:path";
import { SHOAL, Supervisor, flags, healthy, log, selfSignedCert } from "./procs.mjs";

const opts = flags();
if (!opts.port) throw new Error("usage: standalone.mjs --port P [--token T] [--name N] [--https]");
const name = opts.name ?? "standalone";
const sup = new Supervisor(name);
const args = ["standalone", "--port", opts.port, "--data-dir", join(sup.dir, "data")];
const cert = opts.https ? selfSignedCert(sup.dir) : undefined;
if (cert) args.push("--https-cert", cert.cert, "--https-key", cert.key);
const url = `${cert ? "https" : "http"}://127.0.0.1:${opts.port}`;
// In the environment: shoal refuses a token on its command line, which others can read.
// With auth on, tasks run as the suite's own user only with --single-team (no tenants here).
sup.spawn(name, SHOAL, args, opts.token ? { SHOAL_TOKEN: opts.token, SHOAL_SINGLE_TEAM: "true" } : {});
await sup.waitFor(`${url}/api/v1/health`, () => healthy(`${url}/api/v1/health`, cert?.pem));
log(name, `logs in ${sup.logDir}`);
console.log(`shoal ${name} ready at ${url}`);
