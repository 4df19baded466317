// One workflow instance, live: its DAG coloured by task state, the attempts' timeline,
// the task table with logs, and the operator actions the state allows.
import { useEffect, useMemo, useState } from "react";
import { $api, every, invalidate } from "../api/cache";
import { api } from "../api/client";
import type { ActionOffer, InstanceDetail, TaskInstance } from "../api/types";
import { Dag } from "../components/Dag";
import { Gantt } from "../components/Gantt";
import { StateBadge } from "../components/StateBadge";
import { TaskActions } from "../components/TaskActions";
import { TaskLog } from "../components/TaskLog";
import { WaitingTasks } from "../components/WaitingTasks";
import { duration, errorText, when } from "../components/format";
import { useAction } from "../api/useAction";
import { Link, path, useTitle } from "../router";

const ACTIONS: [ActionOffer["action"], string][] = [
  ["stop", "Stop"],
  ["pause", "Pause"],
  ["resume", "Resume"],
  ["rerun", "Rerun"],
  ["resubmit-failed", "Resubmit failed"],
];

const FINISHED = new Set(["success", "failure", "stopped", "paused"]);

/** The newest attempt of each task in the instance's current run. */
function latestAttempts(tasks: TaskInstance[], run: number): Map<string, TaskInstance> {
  const out = new Map<string, TaskInstance>();
  for (const t of tasks) {
    if (t.run !== run) continue;
    const seen = out.get(t.name);
    if (!seen || t.attempt > seen.attempt || (t.attempt === seen.attempt && t.id > seen.id)) out.set(t.name, t);
  }
  return out;
}

/** Progress of each foreach task (`12 done`: its children that passed) and do_while task
 * (`×3`: its latest iteration), from its children's rows (`each[4]`, `poll[3].check`). */
function fanOutProgress(latest: Map<string, TaskInstance>): Map<string, string> {
  const done = new Map<string, number>();
  const iteration = new Map<string, number>();
  for (const [name, t] of latest) {
    const m = /^([^[]+)\[(\d+)\](\.)?/.exec(name);
    if (!m) continue;
    if (m[3]) iteration.set(m[1], Math.max(iteration.get(m[1]) ?? 0, Number(m[2])));
    else done.set(m[1], (done.get(m[1]) ?? 0) + (t.state === "success" ? 1 : 0));
  }
  const out = new Map<string, string>();
  for (const [parent, n] of done) out.set(parent, `${n} done`);
  for (const [parent, k] of iteration) out.set(parent, `×${k}`);
  return out;
}

function Actions({ instance, onDone }: { instance: InstanceDetail; onDone: () => void }) {
  const [status, setStatus] = useState("");
  const { busy, error, run: act } = useAction(onDone);
  // "Stop requested" says the click was taken; the state badge says the rest.
  useEffect(() => {
    if (!status) return;
    const t = setTimeout(() => setStatus(""), 5000);
    return () => clearTimeout(t);
  }, [status]);
  const offers = new Map(instance.actions.map((a) => [a.action, a]));
  const run = async (action: ActionOffer["action"], label: string) => {
    setStatus("");
    const request = () =>
      api.POST("/api/v1/instances/{id}/{action}", { params: { path: { id: instance.id, action } } });
    if (await act(request)) setStatus(`${label} requested`);
  };
  return (
    <div className="instance-actions">
      <div className="row">
        {ACTIONS.map(([action, label]) => {
          const a = offers.get(action);
          const allowed = a?.allowed ?? false;
          return (
            <button
              key={action}
              className={action === "stop" ? "danger" : "secondary"}
              disabled={busy || !allowed}
              title={allowed ? undefined : (a?.reason ?? undefined)}
              onClick={() => run(action, label)}
            >
              {label}
            </button>
          );
        })}
      </div>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {status && <p className="muted">{status}</p>}
    </div>
  );
}

export function InstancePage({ id }: { id: number }) {
  useTitle(`Instance ${id}`);
  const [selected, setSelected] = useState<number | null>(null);
  const { data: inst, error } = $api.useQuery(
    "get",
    "/api/v1/instances/{id}",
    { params: { path: { id } } },
    every(1000),
  );
  // An action changes the instance here and its row on every list of instances.
  const reload = () => invalidate("/api/v1/instances");
  // The definition the instance runs (its version), for the DAG.
  const { data: wf } = $api.useQuery(
    "get",
    "/api/v1/projects/{project}/workflows/{name}",
    {
      params: {
        path: { project: inst?.project ?? "", name: inst?.workflow ?? "" },
        query: { version: inst?.version },
      },
    },
    { enabled: !!inst },
  );
  const latest = useMemo(() => (inst ? latestAttempts(inst.tasks, inst.run) : new Map()), [inst]);
  const states = useMemo(() => {
    const s: Record<string, string> = {};
    for (const [name, t] of latest) s[name] = t.state;
    for (const [parent, progress] of fanOutProgress(latest)) if (s[parent]) s[parent] += ` · ${progress}`;
    return s;
  }, [latest]);

  if (error && !inst)
    return (
      <div className="card">
        <h1>Instance {id}</h1>
        <p role="alert" className="error">
          {errorText(error)}
        </p>
      </div>
    );
  if (!inst) return <p className="muted">Loading…</p>;

  const rows = [...inst.tasks].sort(
    (a, b) => b.run - a.run || a.submitted_at.localeCompare(b.submitted_at) || a.id - b.id,
  );
  const shown = rows.find((t) => t.id === selected);
  const selectTask = (name: string) => {
    const t = latest.get(name);
    if (t) setSelected(t.id);
  };
  return (
    <>
      <p className="crumbs">
        <Link href={path.workflows(inst.project)}>{inst.project}</Link> /{" "}
        <Link href={path.workflow(inst.project, inst.workflow)}>{inst.workflow}</Link> /
      </p>
      <div className="pagehead">
        <h1>Instance {inst.id}</h1>
        <StateBadge state={inst.state} label="Instance state" />
        <span className="muted">
          v{inst.version} · run {inst.run} · {inst.priority} priority
          {inst.schedule_time && ` · schedule time ${when(inst.schedule_time)}`}
        </span>
        {inst.parent_instance_id && (
          <Link href={path.instance(inst.parent_instance_id)}>parent instance {inst.parent_instance_id}</Link>
        )}
        {inst.options.handles_failure_of && (
          <Link href={path.instance(inst.options.handles_failure_of)}>
            handles the failure of instance {inst.options.handles_failure_of}
          </Link>
        )}
      </div>
      <p className="muted">
        Created {when(inst.created_at)} · started {when(inst.started_at)} ·{" "}
        {FINISHED.has(inst.state) ? `ended ${when(inst.ended_at)}` : "running for"} ·{" "}
        {duration(inst.started_at, inst.ended_at)}
        {inst.master && ` · driven by master ${inst.master}`}
      </p>
      <StartOptionsLine options={inst.options} />
      {inst.message && <p className="message-box">{inst.message}</p>}
      <Actions instance={inst} onDone={reload} />
      <WaitingTasks tasks={inst.tasks} onDone={reload} />
      <div className="split">
        {wf ? (
          <Dag tasks={wf.definition.tasks} states={states} onSelect={selectTask} />
        ) : (
          <section aria-label="DAG" className="dag" />
        )}
        <Gantt tasks={inst.tasks.filter((t) => t.run === inst.run)} />
      </div>
      <table aria-label="Tasks">
        <thead>
          <tr>
            <th>Task</th>
            <th>Run</th>
            <th>Attempt</th>
            <th>State</th>
            <th>Worker</th>
            <th>Started</th>
            <th>Ended</th>
            <th>Duration</th>
            <th>Message</th>
            <th>
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((t) => (
            <tr key={t.id} aria-selected={t.id === selected}>
              <td>
                <button className="link" onClick={() => setSelected(t.id)}>
                  {t.name}
                </button>{" "}
                {t.child_instance_id && (
                  <Link href={path.instance(t.child_instance_id)}>child instance {t.child_instance_id}</Link>
                )}
                {t.external && <div className="muted">queue {t.external.queue}</div>}
              </td>
              <td>{t.run}</td>
              <td>{t.attempt}</td>
              <td>
                <StateBadge state={t.state} />
              </td>
              <td>{t.worker ?? "—"}</td>
              <td>{when(t.started_at)}</td>
              <td>{when(t.ended_at)}</td>
              <td>{duration(t.started_at, t.ended_at)}</td>
              <td className="message">
                {/* The worker's message names the exit code already when there is one. */}
                {t.message ?? (t.exit_code !== null && t.exit_code !== 0 ? `exit code ${t.exit_code}` : "")}
              </td>
              <td>
                <TaskActions
                  task={t}
                  instanceState={inst.state}
                  latest={latest.get(t.name)?.id === t.id}
                  onDone={reload}
                />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {shown && <TaskLog key={shown.id} task={shown} />}
    </>
  );
}

/** The options the run was started with that change how it runs, when it has any. */
function StartOptionsLine({ options }: { options: InstanceDetail["options"] }) {
  const shown: [string, string | undefined][] = [
    ["failure strategy", options.failure_strategy],
    ["worker group", options.worker_group],
    ["alert channels", options.alert_channels?.join(", ")],
    ["timeout", options.timeout],
    ["environment", options.environment],
    ["dry run", options.dry_run ? "yes" : undefined],
  ];
  const set = shown.filter(([, v]) => v);
  if (set.length === 0) return null;
  return (
    <p className="muted" aria-label="Start options">
      Started with {set.map(([k, v]) => `${k} ${v}`).join(" · ")}
    </p>
  );
}
