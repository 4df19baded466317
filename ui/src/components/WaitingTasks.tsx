// The instance's wait, callback and external tasks that wait for a completion: an operator
// completes one (an approval, or in place of an external worker) or fails it (a
// rejection), with output parameters the downstream tasks see and a message shown on the
// task. An external task says its queue, worker and lease.
import { useState } from "react";
import { api } from "../api/client";
import type { TaskInstance } from "../api/types";
import { useAction } from "../api/useAction";
import { ExternalOffer } from "./ExternalOffer";

/** `key=value` pairs separated by commas or new lines; an error names a malformed one. */
export function parseOutputs(text: string): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const part of text
    .split(/[,\n]/)
    .map((p) => p.trim())
    .filter(Boolean)) {
    const eq = part.indexOf("=");
    if (eq <= 0) return `"${part}" is not key=value`;
    out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

function Completer({ task, onDone }: { task: TaskInstance; onDone: () => void }) {
  const [outputs, setOutputs] = useState("");
  const [message, setMessage] = useState("");
  const { busy, error, setError, run } = useAction(onDone);
  const complete = async (state: "success" | "failure") => {
    const parsed = parseOutputs(outputs);
    if (typeof parsed === "string") return setError(parsed);
    await run(() =>
      api.POST("/api/v1/task-instances/{id}/complete", {
        params: { path: { id: task.id } },
        body: { state, outputs: parsed, ...(message.trim() ? { message: message.trim() } : {}) },
      }),
    );
  };
  return (
    <div className="card waiting-task" aria-label={`Waiting task ${task.name}`}>
      <p>
        {task.external ? (
          <>
            <strong>{task.name}</strong> ({task.type} task) is done by an external worker; complete it here only in its
            place.
          </>
        ) : (
          <>
            <strong>{task.name}</strong> ({task.type} task) is waiting to be completed.
            {task.message && <span className="muted"> {task.message}</span>}
          </>
        )}
      </p>
      <ExternalOffer task={task} />
      <div className="row">
        <label>
          Outputs
          <input
            value={outputs}
            placeholder="approved_by=ann, ticket=42"
            onChange={(e) => setOutputs(e.target.value)}
          />
        </label>
        <label>
          Message
          <input value={message} placeholder="shown on the task" onChange={(e) => setMessage(e.target.value)} />
        </label>
        <button disabled={busy} onClick={() => complete("success")}>
          Complete
        </button>
        <button className="danger" disabled={busy} onClick={() => complete("failure")}>
          Fail
        </button>
      </div>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </div>
  );
}

export function WaitingTasks({ tasks, onDone }: { tasks: TaskInstance[]; onDone: () => void }) {
  const waiting = tasks.filter((t) => t.state === "waiting");
  if (waiting.length === 0) return null;
  return (
    <section aria-label="Waiting tasks">
      {waiting.map((t) => (
        <Completer key={t.id} task={t} onDone={onDone} />
      ))}
    </section>
  );
}
