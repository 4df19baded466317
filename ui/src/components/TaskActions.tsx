// What an operator does to one task attempt from the instance's task table, as in
// DolphinScheduler's task instance view: kill a running attempt, or force a failed one of
// an ended instance to success (the instance is resubmitted and goes on past it).
import { useState } from "react";
import { send } from "../api/client";
import type { TaskInstance } from "../api/types";
import { actionError } from "./format";

const RUNNING = new Set(["dispatched", "running"]);
const FAILED = new Set(["failure", "killed"]);
const INSTANCE_RUNNING = new Set(["running", "ready_pause", "ready_stop"]);
const INSTANCE_ENDED_BADLY = new Set(["failure", "stopped"]);

/** The action a latest attempt in `state` offers while its instance is `instanceState`. */
export function taskAction(state: string, instanceState: string): "kill" | "force-success" | null {
  if (RUNNING.has(state) && INSTANCE_RUNNING.has(instanceState)) return "kill";
  if (FAILED.has(state) && INSTANCE_ENDED_BADLY.has(instanceState)) return "force-success";
  return null;
}

export function TaskActions({
  task,
  instanceState,
  latest,
  onDone,
}: {
  task: TaskInstance;
  instanceState: string;
  /** Whether this row is the latest attempt of its task (only that one can be acted on). */
  latest: boolean;
  onDone: () => void;
}) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const action = latest ? taskAction(task.state, instanceState) : null;
  if (!action) return null;
  const label = action === "kill" ? "Kill" : "Force success";
  const act = async () => {
    setBusy(true);
    setError("");
    try {
      await send("POST", `/task-instances/${task.id}/${action}`);
      onDone();
    } catch (e) {
      setError(actionError(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        className={action === "kill" ? "danger small" : "secondary small"}
        disabled={busy}
        aria-label={`${label} ${task.name}`}
        title={action === "kill" ? "Kill this attempt" : "Mark it passed and go on with what follows it"}
        onClick={act}
      >
        {label}
      </button>
      {error && (
        <span role="alert" className="error">
          {error}
        </span>
      )}
    </>
  );
}
