// The query cache every page reads through: one request for a query however many
// components show its answer, polled as often as the most eager of them asks.
import { QueryClient } from "@tanstack/react-query";
import createQueryHooks from "openapi-react-query";
import { api, connection, token } from "./client";

export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // The client retries reads while the server is unreachable; any other failure is
      // the answer (shown at once, not after three quiet retries).
      retry: false,
      // Fetched again when a component that shows it mounts; polled queries also when a
      // hidden tab is shown again (see `every`).
      refetchOnWindowFocus: false,
    },
  },
});

/** Typed queries over `api`: `$api.useQuery("get", path, init, options)`, keyed by both. */
export const $api = createQueryHooks(api);

/**
 * After a write: every cached read whose path (the OpenAPI template, `key[1]` of
 * openapi-react-query's `["get", path, init]`) starts with one of `paths` is fetched again
 * at once, shown or not, so every component showing what changed follows, not only the one
 * that wrote, and a page navigated to next shows the change on its first render rather
 * than the old answer until its own fetch returns. Templates, not concrete paths: a
 * workflow's write refetches the cached reads of every workflow, a few cheap requests
 * that never miss one.
 */
export function invalidate(...paths: string[]): Promise<void> {
  return queryClient.invalidateQueries({
    refetchType: "all",
    predicate: ({ queryKey }) => {
      const path = queryKey[1];
      return typeof path === "string" && paths.some((p) => path.startsWith(p));
    },
  });
}

/**
 * Options that poll a query every `ms` while the tab is visible, and at once when it is
 * shown again (live pages poll at ≤ 1 s).
 */
export function every(ms: number) {
  return { refetchInterval: ms, refetchOnWindowFocus: true } as const;
}

// Answers given to one caller are not shown to the next one to sign in on this tab.
let signedInAs = token();
connection.subscribe(() => {
  if (token() !== signedInAs) {
    signedInAs = token();
    queryClient.clear();
  }
});
