// Live masters and workers, external task queues with the external workers seen on them,
// task groups, alert channels and the alerts' delivery state.
import { $api, every } from "../api/cache";
import { useSession } from "../api/session";
import { StateBadge } from "../components/StateBadge";
import { errorText, when } from "../components/format";
import { Link, path, useTitle } from "../router";
import { AlertChannelsPanel } from "./AlertChannelsPanel";
import { TaskGroupsPanel } from "./TaskGroupsPanel";

function Failed({ error }: { error: unknown }) {
  return error ? (
    <p role="alert" className="error">
      {errorText(error)}
    </p>
  ) : null;
}

export function ClusterPage() {
  useTitle("Cluster");
  const nodes = $api.useQuery("get", "/api/v1/cluster", {}, every(2000));
  // Task groups and alert channels are global objects: global admins manage them.
  const manage = useSession()?.admin ?? false;
  const queues = $api.useQuery("get", "/api/v1/external/queues", {}, every(2000));
  const alerts = $api.useQuery("get", "/api/v1/alerts", { params: { query: { limit: 50 } } }, every(2000));
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
                    <meter min={0} max={Math.max(1, n.slots)} value={n.running} aria-label={`load of ${n.addr}`} />{" "}
                    {n.running} / {n.slots}
                  </>
                ) : (
                  `${n.running} instances`
                )}
                {n.overloaded && (
                  <>
                    {" "}
                    <span className="badge tone-bad" title={n.overloaded}>
                      overloaded: claims no new runs
                    </span>
                    <div className="muted">{n.overloaded}</div>
                  </>
                )}
              </td>
              <td>{when(n.started_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>External queues</h2>
      <Failed error={queues.error} />
      <table aria-label="External queues">
        <thead>
          <tr>
            <th>Project</th>
            <th>Queue</th>
            <th>Waiting</th>
            <th>Taken</th>
            <th>External workers seen in the last hour</th>
          </tr>
        </thead>
        <tbody>
          {queues.data?.map((q) => (
            <tr key={`${q.project}/${q.queue}`} aria-label={`Queue ${q.project}/${q.queue}`}>
              <td>
                <Link href={path.workflows(q.project)}>{q.project}</Link>
              </td>
              <td>
                <code>{q.queue}</code>
              </td>
              <td>{q.waiting}</td>
              <td>{q.taken}</td>
              <td>
                {q.workers.length === 0
                  ? "—"
                  : q.workers.map((w, i) => (
                      <span key={w.name}>
                        {i > 0 && ", "}
                        <code>{w.name}</code>{" "}
                        <span className="muted">
                          {w.holding > 0 ? `holds ${w.holding} · ` : ""}seen {when(w.last_seen_at)}
                        </span>
                      </span>
                    ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {queues.data?.length === 0 && (
        <p className="muted">No external tasks offered and no external workers seen in the last hour.</p>
      )}
      <div className="split">
        <TaskGroupsPanel manage={manage} />
        <AlertChannelsPanel manage={manage} />
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
