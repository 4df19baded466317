// Who the signed-in caller is (GET /session), for the header, the nav and what pages offer:
// one query, however many components ask.
import { $api } from "./cache";
import type { Role, Session } from "./types";

export function useSession(): Session | undefined {
  return $api.useQuery("get", "/api/v1/session").data;
}

// A worker (an external worker's token) reads nothing: below every role a page asks for.
const RANK: Record<Role, number> = { worker: -1, viewer: 0, operator: 1, editor: 2, admin: 3 };

/** Whether `has` includes `needs` (a role from viewer up includes the ones below it). */
export function atLeast(has: Role | null | undefined, needs: Role): boolean {
  return has != null && RANK[has] >= RANK[needs];
}
