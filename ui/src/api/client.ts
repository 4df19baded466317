// The one HTTP client of the UI, typed from the OpenAPI document (openapi-fetch): adds the
// token, retries reads while the server is unreachable (and says so on the banner), turns
// a 401 into sign-in and any other refusal into an ApiError carrying the server's reason.
import createClient from "openapi-fetch";
import type { paths } from "./schema";

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Query strings as before the typed client: empty values are left out, not sent as `k=`. */
function querySerializer(query: Record<string, unknown>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  return q.toString();
}

/** The fetch under every call: reads are retried until the server answers again. */
async function shoalFetch(request: Request): Promise<Response> {
  const t = token();
  if (t && !request.headers.has("Authorization")) request.headers.set("Authorization", `Bearer ${t}`);
  // Without auth the server takes a write only with a JSON or YAML content type (one a
  // page of another site cannot send without the server's leave), body or not.
  const read = request.method === "GET";
  if (!read && !request.headers.has("Content-Type")) request.headers.set("Content-Type", "application/json");
  const path = new URL(request.url).pathname;
  for (let delay = 500; ; delay = Math.min(delay * 2, 5000)) {
    let res: Response;
    try {
      res = await fetch(request);
    } catch (e) {
      if (request.signal.aborted) throw e;
      setLost(true);
      // A write may or may not have reached the server: never repeat it blindly.
      if (!read) throw new ApiError(0, "Connection lost: the server did not answer");
      await sleep(delay);
      continue;
    }
    if ((res.status === 502 || res.status === 503 || res.status === 504) && read && path !== "/api/v1/cluster") {
      setLost(true);
      await sleep(delay);
      continue;
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

/**
 * The typed client: paths, parameters and bodies are checked against the OpenAPI
 * document, and path parameters are percent-encoded. A refusal is thrown as ApiError, so
 * an answer's `error` is never set.
 */
export const api = createClient<paths>({ baseUrl: window.location.origin, fetch: shoalFetch, querySerializer });

/** The body of a successful answer (`api` throws on any other). */
export async function answer<T>(call: Promise<{ data?: T; response: Response }>): Promise<T> {
  return (await call).data as T;
}

/** A YAML body sent as-is (the definition endpoints take JSON or YAML). */
export const yaml = (text: string) => ({
  body: text,
  bodySerializer: (b: unknown) => b,
  headers: { "Content-Type": "application/yaml" },
});

/** Checks a token against the server; false when it is refused. */
export async function checkToken(candidate: string): Promise<boolean> {
  const res = await fetch("/api/v1/session", {
    headers: { Authorization: `Bearer ${candidate}` },
  });
  return res.ok;
}
