import { useState } from "react";
import { $api, every, invalidate } from "../api/cache";
import { api } from "../api/client";
import { Dag } from "../components/Dag";
import { Diff } from "../components/Diff";
import { StartDialog } from "../components/StartDialog";
import { StateBadge } from "../components/StateBadge";
import { errorText, when, duration } from "../components/format";
import { useAction } from "../api/useAction";
import { Link, path, useTitle } from "../router";
import { BackfillPanel } from "./BackfillPanel";
import { SchedulePanel } from "./SchedulePanel";
import { TriggersPanel } from "./TriggersPanel";

type Tab = "overview" | "schedule" | "backfill" | "triggers" | "runs";

const where = (project: string, name: string) => ({ path: { project, name } });

function Versions({ project, name, latest }: { project: string; name: string; latest: number }) {
  const versions = $api.useQuery("get", "/api/v1/projects/{project}/workflows/{name}/versions", {
    params: where(project, name),
  });
  // A rollback stores a new version: the workflow (its latest), this list and the
  // workflows list change.
  const { error: rollbackError, run } = useAction(() => invalidate("/api/v1/projects/{project}/workflows"));
  const rollBack = (version: number) =>
    run(() =>
      api.POST("/api/v1/projects/{project}/workflows/{name}/versions/{version}/rollback", {
        params: { path: { project, name, version } },
      }),
    );
  const [from, setFrom] = useState<number>();
  const [to, setTo] = useState<number>();
  const a = from ?? Math.max(1, latest - 1);
  const b = to ?? latest;
  // The two versions compared (shared with other pages showing the same version).
  const version = (v: number) => ({ params: { ...where(project, name), query: { version: v } } });
  const fromDef = $api.useQuery("get", "/api/v1/projects/{project}/workflows/{name}", version(a), {
    enabled: latest > 1,
  });
  const toDef = $api.useQuery("get", "/api/v1/projects/{project}/workflows/{name}", version(b), {
    enabled: latest > 1,
  });
  const error = fromDef.error ?? toDef.error;
  return (
    <div className="card">
      <h2>Versions</h2>
      <ul aria-label="Versions" className="versions">
        {versions.data?.map((v) => (
          <li key={v.version}>
            <b>v{v.version}</b> <span className="muted">{when(v.created_at)}</span>{" "}
            {v.version !== latest && (
              <button
                className="secondary small"
                title="Store this version again as the newest one"
                onClick={() => rollBack(v.version)}
              >
                Make latest
              </button>
            )}
          </li>
        ))}
      </ul>
      {rollbackError && (
        <p role="alert" className="error">
          {rollbackError}
        </p>
      )}
      {latest > 1 && (
        <>
          <div className="row">
            <label>
              Compare
              <select value={a} onChange={(e) => setFrom(Number(e.target.value))}>
                {versions.data?.map((v) => (
                  <option key={v.version} value={v.version}>
                    v{v.version}
                  </option>
                ))}
              </select>
            </label>
            <label>
              with
              <select value={b} onChange={(e) => setTo(Number(e.target.value))}>
                {versions.data?.map((v) => (
                  <option key={v.version} value={v.version}>
                    v{v.version}
                  </option>
                ))}
              </select>
            </label>
          </div>
          {error && (
            <p role="alert" className="error">
              {errorText(error)}
            </p>
          )}
          {fromDef.data && toDef.data && (
            <Diff from={fromDef.data.yaml} to={toDef.data.yaml} fromLabel={`v${a}`} toLabel={`v${b}`} />
          )}
        </>
      )}
    </div>
  );
}

/** Runs at a later time of this workflow, not yet started, each with a Cancel button. */
function Scheduled({ project, name }: { project: string; name: string }) {
  const { data } = $api.useQuery(
    "get",
    "/api/v1/projects/{project}/commands",
    { params: { path: { project } } },
    every(2000),
  );
  const { error, run } = useAction(() => invalidate("/api/v1/projects/{project}/commands", "/api/v1/commands"));
  const later = (data ?? []).filter((c) => c.workflow === name && c.due_at);
  if (later.length === 0 && !error) return null;
  return (
    <section className="card">
      <h2>Scheduled for later</h2>
      <table aria-label="Scheduled runs">
        <thead>
          <tr>
            <th>Command</th>
            <th>Starts at</th>
            <th>Version</th>
            <th>Written</th>
            <th>
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {later.map((c) => (
            <tr key={c.id}>
              <td>{c.id}</td>
              <td>{when(c.due_at)}</td>
              <td>v{c.version}</td>
              <td>{when(c.created_at)}</td>
              <td>
                <button
                  className="secondary small"
                  title="Cancel this run before it starts"
                  onClick={() => run(() => api.DELETE("/api/v1/commands/{id}", { params: { path: { id: c.id } } }))}
                >
                  Cancel
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </section>
  );
}

function Runs({ project, name }: { project: string; name: string }) {
  const query = { project, workflow: name, limit: 20 };
  const { data } = $api.useQuery("get", "/api/v1/instances", { params: { query } }, every(2000));
  if (!data) return <p className="muted">Loading…</p>;
  if (data.length === 0) return <p className="muted">No runs yet.</p>;
  return (
    <table aria-label="Runs">
      <thead>
        <tr>
          <th>Instance</th>
          <th>State</th>
          <th>Version</th>
          <th>Started</th>
          <th>Duration</th>
        </tr>
      </thead>
      <tbody>
        {data.map((i) => (
          <tr key={i.id}>
            <td>
              <Link href={path.instance(i.id)}>#{i.id}</Link>
            </td>
            <td>
              <StateBadge state={i.state} />
            </td>
            <td>v{i.version}</td>
            <td>{when(i.started_at ?? i.created_at)}</td>
            <td>{duration(i.started_at, i.ended_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function WorkflowPage({ project, name, tab }: { project: string; name: string; tab: Tab }) {
  useTitle(name);
  const [starting, setStarting] = useState(false);
  const { data: wf, error } = $api.useQuery("get", "/api/v1/projects/{project}/workflows/{name}", {
    params: where(project, name),
  });
  // The release state shows here and on the workflows list (and a start is refused).
  const { error: releaseError, run } = useAction(() => invalidate("/api/v1/projects/{project}/workflows"));
  const release = (state: "online" | "offline") =>
    run(() =>
      state === "online"
        ? api.POST("/api/v1/projects/{project}/workflows/{name}/online", { params: where(project, name) })
        : api.POST("/api/v1/projects/{project}/workflows/{name}/offline", { params: where(project, name) }),
    );
  const tabs: [string, string, boolean][] = [
    ["Overview", path.workflow(project, name), tab === "overview"],
    ["Edit", path.workflow(project, name, "edit"), false],
    ["Schedule", path.workflow(project, name, "schedule"), tab === "schedule"],
    ["Backfill", path.workflow(project, name, "backfill"), tab === "backfill"],
    ["Triggers", path.workflow(project, name, "triggers"), tab === "triggers"],
    ["Runs", path.workflow(project, name, "runs"), tab === "runs"],
  ];
  return (
    <>
      <p className="crumbs">
        <Link href={path.workflows(project)}>{project}</Link> /
      </p>
      <div className="pagehead">
        <h1>{name}</h1>
        {wf && <span className="muted">v{wf.version}</span>}
        {wf && !wf.online && (
          <span className="badge offline" aria-label="Release state">
            offline
          </span>
        )}
        <span className="spacer" />
        {wf && (
          <button
            className="secondary"
            title={
              wf.online
                ? "Refuse starts and disable its schedule"
                : "Allow starts again (enable the schedule again if wanted)"
            }
            onClick={() => release(wf.online ? "offline" : "online")}
          >
            {wf.online ? "Take offline" : "Bring online"}
          </button>
        )}
        <button
          onClick={() => setStarting(true)}
          disabled={!wf || !wf.online}
          title={wf && !wf.online ? "The workflow is offline" : undefined}
        >
          Start
        </button>
      </div>
      {releaseError && (
        <p role="alert" className="error">
          {releaseError}
        </p>
      )}
      <nav className="tabs" aria-label="Workflow">
        {tabs.map(([label, href, active]) => (
          <Link key={label} href={href} aria-current={active ? "page" : undefined}>
            {label}
          </Link>
        ))}
      </nav>
      {error && (
        <p role="alert" className="error">
          {errorText(error)}
        </p>
      )}
      {wf && tab === "overview" && (
        <>
          {wf.definition.description && <p>{wf.definition.description}</p>}
          <div className="split">
            <Dag tasks={wf.definition.tasks} />
            <section aria-label="Definition" className="card">
              <h2>Definition</h2>
              <pre className="code">{wf.yaml}</pre>
            </section>
          </div>
          <Versions project={project} name={name} latest={wf.version} />
        </>
      )}
      {wf && tab === "schedule" && <SchedulePanel project={project} name={name} />}
      {wf && tab === "backfill" && <BackfillPanel project={project} name={name} />}
      {wf && tab === "triggers" && <TriggersPanel project={project} name={name} />}
      {tab === "runs" && (
        <>
          <Scheduled project={project} name={name} />
          <Runs project={project} name={name} />
        </>
      )}
      {starting && <StartDialog project={project} workflow={name} onClose={() => setStarting(false)} />}
    </>
  );
}
