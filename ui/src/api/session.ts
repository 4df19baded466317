// Who the signed-in caller is (GET /session), for the header, the nav and what pages offer.
import { answer, api, token } from "./client";
import type { Role, Session } from "./types";
import { usePoll } from "./usePoll";

export function useSession(): Session | undefined {
  // Keyed by the token: signing in as someone else asks again.
  return usePoll((signal) => answer(api.GET("/api/v1/session", { signal })), `session:${token() ?? ""}`).data;
}

// A worker (an external worker's token) reads nothing: below every role a page asks for.
const RANK: Record<Role, number> = { worker: -1, viewer: 0, operator: 1, editor: 2, admin: 3 };

/** Whether `has` includes `needs` (a role from viewer up includes the ones below it). */
export function atLeast(has: Role | null | undefined, needs: Role): boolean {
  return has != null && RANK[has] >= RANK[needs];
}
