#!/usr/bin/env node
// `shoal standalone` for the browser suite, on a fresh data dir that is removed on exit.
//
//   node e2e/standalone.mjs --port 18080 [--token SECRET] [--name standalone]
//
// Prints "shoal standalone ready at URL" once /api/v1/health answers; SIGTERM or Ctrl-C
// stops it and removes its data.
import { join } from "node:path";
import { SHOAL, Supervisor, flags, healthy, log } from "./procs.mjs";

const opts = flags();
if (!opts.port) throw new Error("usage: standalone.mjs --port P [--token T] [--name N]");
const name = opts.name ?? "standalone";
const sup = new Supervisor(name);
const url = `http://127.0.0.1:${opts.port}`;
const args = ["standalone", "--port", opts.port, "--data-dir", join(sup.dir, "data")];
if (opts.token) args.push("--token", opts.token);
sup.spawn(name, SHOAL, args);
await sup.waitFor(`${url}/api/v1/health`, () => healthy(`${url}/api/v1/health`));
log(name, `logs in ${sup.logDir}`);
console.log(`shoal ${name} ready at ${url}`);
