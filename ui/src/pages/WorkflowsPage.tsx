import { useEffect, useState } from "react";
import { $api, every } from "../api/cache";
import { StartDialog } from "../components/StartDialog";
import { StateBadge } from "../components/StateBadge";
import { errorText, when } from "../components/format";
import { rememberProject } from "../project";
import { Link, navigate, path, useTitle } from "../router";

function ProjectSwitcher({ project }: { project: string }) {
  const { data } = $api.useQuery("get", "/api/v1/projects");
  const names = new Set((data ?? []).map((p) => p.name));
  names.add(project);
  return (
    <label className="inline">
      Project
      <select
        value={project}
        onChange={(e) => {
          rememberProject(e.target.value);
          navigate(path.workflows(e.target.value));
        }}
      >
        {[...names].sort().map((n) => (
          <option key={n}>{n}</option>
        ))}
      </select>
    </label>
  );
}

export function WorkflowsPage({ project }: { project: string }) {
  useTitle(`Workflows · ${project}`);
  useEffect(() => rememberProject(project), [project]);
  const [starting, setStarting] = useState<string | null>(null);
  const { data, error } = $api.useQuery(
    "get",
    "/api/v1/projects/{project}/workflows",
    { params: { path: { project } } },
    every(5000),
  );
  return (
    <>
      <div className="pagehead">
        <h1>Workflows</h1>
        <ProjectSwitcher project={project} />
        <span className="spacer" />
        <Link href={path.newWorkflow(project)} className="button">
          New workflow
        </Link>
      </div>
      {error && (
        <p role="alert" className="error">
          {errorText(error)}
        </p>
      )}
      {data && data.length === 0 && (
        <div className="card empty">
          <p>
            No workflows in project <b>{project}</b> yet.{" "}
            <Link href={path.newWorkflow(project)}>Write one in the editor</Link> or apply a YAML file with{" "}
            <code>shoal apply FILE</code>.
          </p>
        </div>
      )}
      {data && data.length > 0 && (
        <table aria-label="Workflows">
          <thead>
            <tr>
              <th>Name</th>
              <th>Version</th>
              <th>Schedule</th>
              <th>Next fire</th>
              <th>Last run</th>
              <th>
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {data.map((w) => (
              <tr key={w.name}>
                <td>
                  <Link href={path.workflow(project, w.name)}>{w.name}</Link>{" "}
                  {!w.online && <span className="badge offline">offline</span>}
                </td>
                <td>v{w.latest_version}</td>
                <td>
                  {w.schedule ? (
                    <span title={w.schedule.timezone}>
                      <code>{w.schedule.cron}</code> {w.schedule.enabled ? "" : "(disabled)"}
                    </span>
                  ) : (
                    "—"
                  )}
                </td>
                <td>{w.schedule?.enabled ? when(w.schedule.next_fire) : "—"}</td>
                <td>
                  {w.last_run ? (
                    <Link
                      href={path.instance(w.last_run.id)}
                      aria-label={`last run ${w.last_run.id}: ${w.last_run.state}`}
                    >
                      <StateBadge state={w.last_run.state} /> {when(w.last_run.created_at)}
                    </Link>
                  ) : (
                    "never run"
                  )}
                </td>
                <td className="right">
                  <button
                    onClick={() => setStarting(w.name)}
                    disabled={!w.online}
                    title={w.online ? undefined : "The workflow is offline"}
                  >
                    Start
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {!data && !error && <p className="muted">Loading…</p>}
      {starting && <StartDialog project={project} workflow={starting} onClose={() => setStarting(null)} />}
    </>
  );
}
