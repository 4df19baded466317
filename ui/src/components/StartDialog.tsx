// "Start run": a form built from the definition's params (defaults filled in), with
// priority, dry run and start-from-task + scope. On success it opens the new instance.
import { useEffect, useRef, useState, type FormEvent } from "react";
import { getJson, send } from "../api/client";
import type { CommandStatus, StoredWorkflow } from "../api/types";
import { navigate, path } from "../router";
import { errorText } from "./format";

const PRIORITIES = ["highest", "high", "medium", "low", "lowest"];

export function StartDialog({ project, workflow, onClose }: { project: string; workflow: string; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [def, setDef] = useState<StoredWorkflow>();
  const [params, setParams] = useState<Record<string, string>>({});
  const [priority, setPriority] = useState("");
  const [dryRun, setDryRun] = useState(false);
  const [fromTask, setFromTask] = useState("");
  const [scope, setScope] = useState("downstream");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState("");

  useEffect(() => {
    ref.current?.showModal();
    getJson<StoredWorkflow>(`/projects/${encodeURIComponent(project)}/workflows/${encodeURIComponent(workflow)}`)
      .then((d) => {
        setDef(d);
        setParams({ ...(d.definition.params ?? {}) });
      })
      .catch((e) => setError(errorText(e)));
  }, [project, workflow]);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError("");
    setBusy("Submitting…");
    try {
      const body: Record<string, unknown> = { params, dry_run: dryRun };
      if (priority) body.priority = priority;
      if (fromTask) {
        body.from_task = fromTask;
        body.scope = scope;
      }
      const { command_id } = await send<{ command_id: number }>(
        "POST",
        `/projects/${encodeURIComponent(project)}/workflows/${encodeURIComponent(workflow)}/start`,
        { body },
      );
      setBusy(`Command ${command_id} written; waiting for a master to take it…`);
      // The master turns the command into an instance within moments.
      for (let i = 0; i < 600; i++) {
        const st = await getJson<CommandStatus>(`/commands/${command_id}`);
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
        {def && <p className="muted">Version {def.version}</p>}
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
            <select value={priority} onChange={(e) => setPriority(e.target.value)}>
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
            <select value={scope} onChange={(e) => setScope(e.target.value)} disabled={!fromTask} title={fromTask ? undefined : "choose a task to start from first"}>
              <option value="downstream">downstream</option>
              <option value="upstream">upstream</option>
              <option value="only">only</option>
            </select>
          </label>
        </div>
        <label className="check">
          <input type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.target.checked)} /> Dry run
        </label>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        {busy && <p role="status">{busy}</p>}
        <div className="actions">
          <button type="button" className="secondary" onClick={() => ref.current?.close()}>
            Cancel
          </button>
          <button type="submit" disabled={!def || !!busy}>
            Start run
          </button>
        </div>
      </form>
    </dialog>
  );
}
