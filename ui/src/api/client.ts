// The one HTTP client of the UI: adds the token, retries reads while the server is
// unreachable (and says so on the banner), turns a 401 into sign-in and any other
// refusal into an ApiError carrying the server's reason.

const TOKEN_KEY = "shoal.token";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

type Listener = () => void;
const listeners = new Set<Listener>();
let connectionLost = false;
let signInNeeded = false;

/** Connection and sign-in state, for the banner and the sign-in gate. */
export const connection = {
  get lost() {
    return connectionLost;
  },
  get signInNeeded() {
    return signInNeeded;
  },
  subscribe(l: Listener) {
    listeners.add(l);
    return () => listeners.delete(l);
  },
};

function notify() {
  for (const l of listeners) l();
}

function setLost(lost: boolean) {
  if (connectionLost !== lost) {
    connectionLost = lost;
    notify();
  }
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(t: string | null) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
  signInNeeded = false;
  notify();
}

export function requireSignIn() {
  if (!signInNeeded) {
    signInNeeded = true;
    notify();
  }
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  /** Raw body (YAML) sent as-is with this content type. */
  text?: { body: string; type: string };
  query?: Record<string, string | number | boolean | undefined | null>;
  signal?: AbortSignal;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A fetch under `/api/v1`; reads are retried until the server answers again. */
export async function request(path: string, opts: RequestOptions = {}): Promise<Response> {
  const method = opts.method ?? "GET";
  const url = new URL(`/api/v1${path}`, window.location.origin);
  for (const [k, v] of Object.entries(opts.query ?? {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  }
  const headers: Record<string, string> = {};
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  let body: string | undefined;
  if (opts.text) {
    headers["Content-Type"] = opts.text.type;
    body = opts.text.body;
  } else if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(opts.body);
  } else if (method !== "GET") {
    // Without auth the server takes a write only with a JSON or YAML content type (one a
    // page of another site cannot send without the server's leave), body or not.
    headers["Content-Type"] = "application/json";
  }
  for (let delay = 500; ; delay = Math.min(delay * 2, 5000)) {
    let res: Response;
    try {
      res = await fetch(url, { method, headers, body, signal: opts.signal });
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      setLost(true);
      // A write may or may not have reached the server: never repeat it blindly.
      if (method !== "GET") throw new ApiError(0, "Connection lost: the server did not answer");
      await sleep(delay);
      continue;
    }
    if (res.status === 502 || res.status === 503 || res.status === 504) {
      if (method === "GET" && path !== "/cluster") {
        setLost(true);
        await sleep(delay);
        continue;
      }
    }
    setLost(false);
    if (res.status === 401) {
      requireSignIn();
      throw new ApiError(401, "sign in with a token to continue");
    }
    if (!res.ok) {
      let reason = `${res.status} ${res.statusText}`;
      let parsed: Record<string, unknown> = {};
      try {
        parsed = await res.json();
        if (typeof parsed.error === "string") reason = parsed.error;
      } catch {
        /* not JSON: keep the status line */
      }
      throw new ApiError(res.status, reason, parsed);
    }
    return res;
  }
}

export async function getJson<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const res = await request(path, opts);
  return (await res.json()) as T;
}

export async function send<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
  const res = await request(path, { ...opts, method });
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Checks a token against the server; false when it is refused. */
export async function checkToken(candidate: string): Promise<boolean> {
  const res = await fetch("/api/v1/session", {
    headers: { Authorization: `Bearer ${candidate}` },
  });
  return res.ok;
}
