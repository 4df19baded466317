// Live masters and workers, task groups, alert channels and the alerts' delivery state.
import { getJson } from "../api/client";
import type { Alert, AlertChannel, ClusterNode, TaskGroup } from "../api/types";
import { usePoll } from "../api/usePoll";
import { StateBadge } from "../components/StateBadge";
import { errorText, when } from "../components/format";
import { Link, path, useTitle } from "../router";

function Failed({ error }: { error?: Error }) {
  return error ? (
    <p role="alert" className="error">
      {errorText(error)}
    </p>
  ) : null;
}

export function ClusterPage() {
  useTitle("Cluster");
  const nodes = usePoll((signal) => getJson<ClusterNode[]>("/cluster", { signal }), "nodes", 2000);
  const groups = usePoll((signal) => getJson<TaskGroup[]>("/task-groups", { signal }), "groups", 2000);
  const channels = usePoll((signal) => getJson<AlertChannel[]>("/alert-channels", { signal }), "channels", 5000);
  const alerts = usePoll((signal) => getJson<Alert[]>("/alerts", { query: { limit: 50 }, signal }), "alerts", 2000);
  return (
    <>
      <div className="pagehead">
        <h1>Cluster</h1>
      </div>
      <h2>Masters and workers</h2>
      <Failed error={nodes.error} />
      <table aria-label="Nodes">
        <thead>
          <tr>
            <th>Role</th>
            <th>Address</th>
            <th>Groups</th>
            <th>Load (running / slots)</th>
            <th>Up since</th>
          </tr>
        </thead>
        <tbody>
          {nodes.data?.map((n) => (
            <tr key={`${n.role}-${n.addr}`}>
              <td>{n.role}</td>
              <td>
                <code>{n.addr}</code>
              </td>
              <td>{n.groups.join(", ") || "—"}</td>
              <td>
                {n.role === "worker" ? (
                  <>
                    <meter min={0} max={Math.max(1, n.slots)} value={n.running} aria-label={`load of ${n.addr}`} /> {n.running} / {n.slots}
                  </>
                ) : (
                  `${n.running} instances`
                )}
              </td>
              <td>{when(n.started_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="split">
        <div>
          <h2>Task groups</h2>
          <Failed error={groups.error} />
          <table aria-label="Task groups">
            <thead>
              <tr>
                <th>Name</th>
                <th>In use / slots</th>
                <th>Waiting</th>
                <th>Description</th>
              </tr>
            </thead>
            <tbody>
              {groups.data?.map((g) => (
                <tr key={g.name}>
                  <td>{g.name}</td>
                  <td>
                    {g.in_use} / {g.slots}
                  </td>
                  <td>{g.waiting}</td>
                  <td>{g.description}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {groups.data?.length === 0 && <p className="muted">No task groups (shoal task-group create NAME --slots N).</p>}
        </div>
        <div>
          <h2>Alert channels</h2>
          <Failed error={channels.error} />
          <table aria-label="Alert channels">
            <thead>
              <tr>
                <th>Name</th>
                <th>Type</th>
                <th>Target</th>
              </tr>
            </thead>
            <tbody>
              {channels.data?.map((c) => (
                <tr key={c.name}>
                  <td>{c.name}</td>
                  <td>
                    {c.type}
                    {c.format && c.format !== "json" ? ` (${c.format})` : ""}
                  </td>
                  <td>
                    <code>{c.url ?? "master log"}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {channels.data?.length === 0 && <p className="muted">No alert channels (shoal alert-channel create …).</p>}
        </div>
      </div>
      <h2>Alerts</h2>
      <Failed error={alerts.error} />
      <table aria-label="Alerts">
        <thead>
          <tr>
            <th>Alert</th>
            <th>Instance</th>
            <th>Channel</th>
            <th>Event</th>
            <th>Delivery</th>
            <th>Attempts</th>
            <th>Last error</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {alerts.data?.map((a) => {
            const inst = a.workflow_instance_id;
            return (
              <tr key={a.id}>
                <td>{a.id}</td>
                <td>{inst ? <Link href={path.instance(inst)}>#{inst}</Link> : "—"}</td>
                <td>{a.channel}</td>
                <td>{a.event}</td>
                <td>
                  <StateBadge state={a.state} />
                </td>
                <td>{a.attempts}</td>
                <td className="message">{a.last_error}</td>
                <td>{when(a.created_at)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {alerts.data?.length === 0 && <p className="muted">No alerts yet.</p>}
    </>
  );
}
