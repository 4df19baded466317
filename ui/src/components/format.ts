import { ApiError } from "../api/client";
/** A time for tables: local date and time, or a dash. */
export function when(t: string | null | undefined): string {
  if (!t) return "—";
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toLocaleString();
}

/** Seconds between two times (now when `end` is missing), as "1.2 s" / "3 m 4 s". */
export function duration(start: string | null | undefined, end: string | null | undefined): string {
  if (!start) return "—";
  const ms = (end ? new Date(end) : new Date()).getTime() - new Date(start).getTime();
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} m ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
}

export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** An operator action's failure: a refusal (409) says so, with the server's reason. */
export function actionError(e: unknown): string {
  return e instanceof ApiError && e.status === 409 ? `Refused: ${e.message}` : errorText(e);
}
