// "Start run": a form built from the definition's params (defaults filled in), with the
// version to run (the latest by default), priority, dry run and start-from-task + scope,
// and the run's own failure strategy, worker group, alert channels, timeout, environment
// and start time. The run pins the version the form shows. On success it opens the new
// instance; a run at a later time shows on the workflow's Runs tab until it starts.
import { keepPreviousData } from "@tanstack/react-query";
import { useEffect, useRef, useState, type FormEvent } from "react";
import { $api } from "../api/cache";
import { answer, api } from "../api/client";
import type { Priority, Scope, StartRequest } from "../api/types";
import { navigate, path } from "../router";
import { errorText } from "./format";
import { cleanRunOptions, RunOptionsFields, type RunOptions } from "./RunOptions";

const PRIORITIES: Priority[] = ["highest", "high", "medium", "low", "lowest"];

export function StartDialog({
  project,
  workflow,
  onClose,
}: {
  project: string;
  workflow: string;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  // The version chosen (the latest when undefined).
  const [version, setVersion] = useState<number>();
  const [params, setParams] = useState<Record<string, string>>({});
  const [priority, setPriority] = useState<Priority | "">("");
  const [dryRun, setDryRun] = useState(false);
  const [fromTask, setFromTask] = useState("");
  const [scope, setScope] = useState<Scope>("downstream");
  const [options, setOptions] = useState<RunOptions>({});
  const [at, setAt] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState("");

  const where = { path: { project, name: workflow } };
  // The latest is asked for as the workflow page asks for it (one cached answer).
  const shown = $api.useQuery(
    "get",
    "/api/v1/projects/{project}/workflows/{name}",
    { params: version === undefined ? where : { ...where, query: { version } } },
    { placeholderData: keepPreviousData },
  );
  const def = shown.data;
  const versions = $api.useQuery("get", "/api/v1/projects/{project}/workflows/{name}/versions", { params: where });
  const loadError = shown.error ?? versions.error;

  // A version shown fills in its params' defaults and forgets the task to start from.
  const [filled, setFilled] = useState<number>();
  if (def && !shown.isPlaceholderData && def.version !== filled) {
    setFilled(def.version);
    setParams({ ...(def.definition.params ?? {}) });
    setFromTask("");
  }

  useEffect(() => {
    ref.current?.showModal();
  }, []);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError("");
    setBusy("Submitting…");
    try {
      const body: StartRequest = { params, dry_run: dryRun, version: def?.version, ...cleanRunOptions(options) };
      if (priority) body.priority = priority;
      if (fromTask) {
        body.from_task = fromTask;
        body.scope = scope;
      }
      // The browser's local time, sent with its offset.
      if (at) body.at = new Date(at).toISOString();
      const start = api.POST("/api/v1/projects/{project}/workflows/{name}/start", { params: where, body });
      const { command_id } = await answer(start);
      if (at) {
        navigate(path.workflow(project, workflow, "runs"));
        ref.current?.close();
        return;
      }
      setBusy(`Command ${command_id} written; waiting for a master to take it…`);
      // The master turns the command into an instance within moments. Asked imperatively:
      // the status of this one submission, polled until it settles, is no shown read.
      for (let i = 0; i < 600; i++) {
        const st = await answer(api.GET("/api/v1/commands/{id}", { params: { path: { id: command_id } } }));
        if (st.status === "done" && st.workflow_instance_id) {
          navigate(path.instance(st.workflow_instance_id));
          return;
        }
        if (st.status === "error") throw new Error(st.error ?? "the command failed");
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`command ${command_id} is still pending: is a master running?`);
    } catch (err) {
      setError(errorText(err));
      setBusy("");
    }
  };

  const names = Object.keys(def?.definition.params ?? {});
  return (
    <dialog ref={ref} aria-label={`Start ${workflow}`} onClose={onClose} className="card dialog">
      <form onSubmit={submit}>
        <h2>Start {workflow}</h2>
        <label>
          Version
          <select
            value={def?.version ?? ""}
            onChange={(e) => setVersion(Number(e.target.value))}
            disabled={(versions.data?.length ?? 0) < 2}
          >
            {versions.data?.map((v, i) => (
              <option key={v.version} value={v.version}>
                v{v.version}
                {i === 0 ? " (latest)" : ""}
              </option>
            ))}
          </select>
        </label>
        {names.length > 0 && (
          <fieldset>
            <legend>Parameters</legend>
            {names.map((n) => (
              <label key={n}>
                {n}
                <input value={params[n] ?? ""} onChange={(e) => setParams({ ...params, [n]: e.target.value })} />
              </label>
            ))}
          </fieldset>
        )}
        <div className="row">
          <label>
            Priority
            <select value={priority} onChange={(e) => setPriority(e.target.value as Priority | "")}>
              <option value="">the workflow's</option>
              {PRIORITIES.map((p) => (
                <option key={p}>{p}</option>
              ))}
            </select>
          </label>
          <label>
            Start from task
            <select value={fromTask} onChange={(e) => setFromTask(e.target.value)}>
              <option value="">the first tasks</option>
              {def?.definition.tasks.map((t) => (
                <option key={t.name}>{t.name}</option>
              ))}
            </select>
          </label>
          <label>
            Scope
            <select
              value={scope}
              onChange={(e) => setScope(e.target.value as Scope)}
              disabled={!fromTask}
              title={fromTask ? undefined : "choose a task to start from first"}
            >
              <option value="downstream">downstream</option>
              <option value="upstream">upstream</option>
              <option value="only">only</option>
            </select>
          </label>
        </div>
        <RunOptionsFields
          project={project}
          legend="This run"
          value={options}
          onChange={setOptions}
          definition={def?.definition}
        >
          <label>
            Start at
            <input
              type="datetime-local"
              value={at}
              onChange={(e) => setAt(e.target.value)}
              title="Leave empty to start now"
            />
          </label>
        </RunOptionsFields>
        <label className="check">
          <input type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.target.checked)} /> Dry run
        </label>
        {(error || loadError) && (
          <p role="alert" className="error">
            {error || errorText(loadError)}
          </p>
        )}
        {busy && <p role="status">{busy}</p>}
        <div className="actions">
          <button type="button" className="secondary" onClick={() => ref.current?.close()}>
            Cancel
          </button>
          <button type="submit" disabled={!def || !!busy}>
            {at ? "Schedule run" : "Start run"}
          </button>
        </div>
      </form>
    </dialog>
  );
}
