// Process supervision shared by the launchers of the browser suite (standalone.mjs,
// cluster.mjs): child processes with their output in log files, readiness polling, and
// one clean-up on any way out (SIGTERM from Playwright, Ctrl-C, an error), after which no
// child is left running and every temporary directory is gone.
import { execFileSync, spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import https from "node:https";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** The shoal binary under test: $SHOAL_BIN, else the workspace's debug build. */
export const SHOAL = process.env.SHOAL_BIN ?? resolve(here, "../../target/debug/shoal");

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function log(name, ...msg) {
  process.stderr.write(`[${name}] ${msg.join(" ")}\n`);
}

/**
 * A self-signed certificate for 127.0.0.1 (not a CA's, so it can be its own trust anchor)
 * and its key, made with openssl in `dir`; returns their paths and the certificate's PEM.
 */
export function selfSignedCert(dir) {
  const cert = join(dir, "https.pem");
  const key = join(dir, "https.key");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "2",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-addext",
      "basicConstraints=critical,CA:FALSE",
    ],
    { stdio: "ignore" },
  );
  return { cert, key, pem: readFileSync(cert) };
}

/** `--flag value` pairs of argv as an object. */
export function flags(argv = process.argv.slice(2)) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new Error(`unexpected argument ${argv[i]}`);
    out[m[1]] = m[2] ?? (argv[i + 1] && !argv[i + 1].startsWith("--") ? argv[++i] : "true");
  }
  return out;
}

/** The environment without inherited SHOAL_* settings, so only our flags configure shoal. */
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("SHOAL_")) env[k] = v;
  return { ...env, RUST_LOG: process.env.RUST_LOG ?? "info", NO_COLOR: "1", ...extra };
}

export class Supervisor {
  /** `name` prefixes messages; logs go to $SHOAL_E2E_LOG_DIR/<name>/ when set (kept), else into the temp dir. */
  constructor(name) {
    this.name = name;
    this.children = [];
    this.cleanups = [];
    this.stopping = false;
    if (!existsSync(SHOAL)) throw new Error(`${SHOAL} does not exist: run \`cargo build -p shoal\` first`);
    this.dir = mkdtempSync(join(tmpdir(), `shoal-e2e-${name}-`));
    this.cleanups.push(() => rmSync(this.dir, { recursive: true, force: true }));
    const keep = process.env.SHOAL_E2E_LOG_DIR;
    this.logDir = keep ? resolve(keep, name) : join(this.dir, "logs");
    rmSync(this.logDir, { recursive: true, force: true });
    mkdirSync(this.logDir, { recursive: true });
    for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(sig, () => this.shutdown(0, sig));
    process.on("uncaughtException", (e) => {
      log(this.name, "error:", e?.stack ?? e);
      this.shutdown(1);
    });
    process.on("unhandledRejection", (e) => {
      log(this.name, "error:", e?.stack ?? e);
      this.shutdown(1);
    });
  }

  /** Starts `program args` with its stdout and stderr in `<logDir>/<name>.log`. */
  spawn(name, program, args, env = {}) {
    const file = join(this.logDir, `${name}.log`);
    const fd = openSync(file, "a");
    const child = spawn(program, args, { env: cleanEnv(env), stdio: ["ignore", fd, fd] });
    closeSync(fd);
    const proc = { name, child, file, exited: false };
    child.on("exit", (code, signal) => {
      proc.exited = true;
      if (!this.stopping) {
        log(this.name, `${name} exited unexpectedly (code ${code}, signal ${signal}); the end of ${file}:`);
        process.stderr.write(this.tail(proc));
      }
    });
    child.on("error", (e) => log(this.name, `${name}: ${e.message}`));
    this.children.push(proc);
    return proc;
  }

  tail(proc, lines = 30) {
    try {
      return readFileSync(proc.file, "utf8").split("\n").slice(-lines).join("\n") + "\n";
    } catch {
      return "";
    }
  }

  /** Polls `check` (async, truthy when ready) until `timeoutMs`; fails early if a child died. */
  async waitFor(what, check, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
      const dead = this.children.find((p) => p.exited);
      if (dead) throw new Error(`${dead.name} exited while waiting for ${what}`);
      try {
        const v = await check();
        if (v) return v;
      } catch (e) {
        last = e;
      }
      if (Date.now() > deadline)
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (${last.message})` : ""}`);
      await sleep(200);
    }
  }

  onCleanup(fn) {
    this.cleanups.push(fn);
  }

  /** Stops every child (SIGTERM, SIGKILL after 5 s), runs the clean-ups newest first, exits. */
  async shutdown(code = 0, why = "") {
    if (this.stopping) return;
    this.stopping = true;
    if (why) log(this.name, `${why}: stopping`);
    // Workers and masters first, etcd last (reverse start order).
    for (const p of [...this.children].reverse()) {
      if (p.exited) continue;
      p.child.kill("SIGTERM");
      const deadline = Date.now() + 5000;
      while (!p.exited && Date.now() < deadline) await sleep(50);
      if (!p.exited) {
        log(this.name, `${p.name} ignored SIGTERM; killing it`);
        p.child.kill("SIGKILL");
        while (!p.exited) await sleep(20);
      }
    }
    for (const fn of [...this.cleanups].reverse()) {
      try {
        await fn();
      } catch (e) {
        log(this.name, `clean-up failed: ${e.message}`);
        code = code || 1;
      }
    }
    process.exit(code);
  }
}

/** GET a URL and parse JSON; throws on a non-2xx answer. */
export async function getJson(url, token) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(2000) });
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  return res.json();
}

/** Whether `url` answers 200; an https URL is trusted with the PEM certificate `ca`. */
export async function healthy(url, ca) {
  if (!ca) {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return res.ok;
  }
  return new Promise((resolve, reject) => {
    const req = https.get(url, { ca, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy(new Error(`${url} did not answer in 2 s`)));
    req.on("error", reject);
  });
}
