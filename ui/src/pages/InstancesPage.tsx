// Every instance, newest first, filtered and paged by the server; refreshed every 2 s.
import { useQuery } from "@tanstack/react-query";
import { every } from "../api/cache";
import { api } from "../api/client";
import type { WorkflowState } from "../api/types";
import { StateBadge } from "../components/StateBadge";
import { duration, errorText, when } from "../components/format";
import { Link, path, useQueryState, useTitle } from "../router";

const PAGE = 50;
const STATES: WorkflowState[] = [
  "submitted",
  "running",
  "ready_pause",
  "paused",
  "ready_stop",
  "stopped",
  "failure",
  "success",
  "serial_wait",
];

/** `datetime-local` value → RFC 3339 in the browser's zone. */
const rfc3339 = (local: string) => (local ? new Date(local).toISOString() : "");

export function InstancesPage() {
  useTitle("Instances");
  const [q, setQ] = useQueryState();
  const filters = {
    project: q.get("project") ?? "",
    workflow: q.get("workflow") ?? "",
    state: q.get("state") ?? "",
    from: q.get("from") ?? "",
    to: q.get("to") ?? "",
  };
  const offset = Number(q.get("offset") ?? 0) || 0;
  const set = (change: Partial<typeof filters> & { offset?: number }) =>
    setQ({ ...filters, offset: String(change.offset ?? 0), ...change } as Record<string, string>);

  // The state filter is one of STATES (the select offers no other), or none.
  const state = (filters.state || undefined) as WorkflowState | undefined;
  const query = { ...filters, state, from: rfc3339(filters.from), to: rfc3339(filters.to), limit: PAGE, offset };
  // A page of rows and the total the server counted (a header, so not $api.useQuery). Keyed
  // like $api's reads (plus a marker: the answer differs), so `invalidate` reaches it.
  const { data, error } = useQuery({
    queryKey: ["get", "/api/v1/instances", { params: { query } }, "with total"],
    queryFn: async ({ signal }) => {
      const { data, response } = await api.GET("/api/v1/instances", { params: { query }, signal });
      const rows = data ?? [];
      return { rows, total: Number(response.headers.get("X-Total-Count") ?? rows.length) };
    },
    ...every(2000),
  });

  const total = data?.total ?? 0;
  const first = total === 0 ? 0 : offset + 1;
  const last = Math.min(offset + PAGE, total);
  return (
    <>
      <div className="pagehead">
        <h1>Instances</h1>
      </div>
      <form className="filters" onSubmit={(e) => e.preventDefault()} role="search">
        <label>
          Project
          <input value={filters.project} onChange={(e) => set({ project: e.target.value })} placeholder="any" />
        </label>
        <label>
          Workflow
          <input value={filters.workflow} onChange={(e) => set({ workflow: e.target.value })} placeholder="any" />
        </label>
        <label>
          State
          <select value={filters.state} onChange={(e) => set({ state: e.target.value })}>
            <option value="">any</option>
            {STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          From
          <input type="datetime-local" value={filters.from} onChange={(e) => set({ from: e.target.value })} />
        </label>
        <label>
          To
          <input type="datetime-local" value={filters.to} onChange={(e) => set({ to: e.target.value })} />
        </label>
      </form>
      {error && (
        <p role="alert" className="error">
          {errorText(error)}
        </p>
      )}
      <table aria-label="Instances">
        <thead>
          <tr>
            <th>Instance</th>
            <th>Workflow</th>
            <th>State</th>
            <th>Run</th>
            <th>Schedule time</th>
            <th>Created</th>
            <th>Duration</th>
            <th>Message</th>
          </tr>
        </thead>
        <tbody>
          {data?.rows.map((i) => (
            <tr key={i.id}>
              <td>
                <Link href={path.instance(i.id)}>#{i.id}</Link>
              </td>
              <td>
                <Link href={path.workflow(i.project, i.workflow)}>
                  {i.project}/{i.workflow}
                </Link>{" "}
                <span className="muted">v{i.version}</span>
              </td>
              <td>
                <StateBadge state={i.state} />
              </td>
              <td>{i.run}</td>
              <td>{when(i.schedule_time)}</td>
              <td>{when(i.created_at)}</td>
              <td>{duration(i.started_at, i.ended_at)}</td>
              <td className="message">{i.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {data && data.rows.length === 0 && <p className="muted">No instances match.</p>}
      <div className="pager">
        <button
          className="secondary"
          disabled={offset === 0}
          onClick={() => set({ offset: Math.max(0, offset - PAGE) })}
        >
          Previous
        </button>
        <span aria-live="polite">
          {first}–{last} of {total}
        </span>
        <button className="secondary" disabled={last >= total} onClick={() => set({ offset: offset + PAGE })}>
          Next
        </button>
      </div>
    </>
  );
}
