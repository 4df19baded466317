// What an operator does to one task attempt from the instance's task table, as in
// DolphinScheduler's task instance view: kill a running attempt, force a failed one of an
// ended instance to success (the instance is resubmitted and goes on past it), or rerun
// an ended task and what follows it while the other tasks keep their state.
import { api } from "../api/client";
import type { TaskInstance } from "../api/types";
import { useAction } from "../api/useAction";

const RUNNING = new Set(["dispatched", "running"]);
const FAILED = new Set(["failure", "killed"]);
const INSTANCE_RUNNING = new Set(["running", "ready_pause", "ready_stop"]);
const INSTANCE_ENDED_BADLY = new Set(["failure", "stopped"]);
const INSTANCE_ENDED = new Set(["success", "failure", "stopped"]);
const TASK_ENDED = new Set(["success", "failure", "killed", "forced_success"]);

type TaskAction = "kill" | "force-success" | "rerun";

const LABELS: Record<TaskAction, string> = { kill: "Kill", "force-success": "Force success", rerun: "Rerun from here" };
const TITLES: Record<TaskAction, string> = {
  kill: "Kill this attempt",
  "force-success": "Mark it passed and go on with what follows it",
  rerun: "Run this task and what follows it again; the other tasks keep their state",
};

/** The actions a latest attempt in `state` offers while its instance is `instanceState`. */
export function taskActions(state: string, instanceState: string): TaskAction[] {
  const offered: TaskAction[] = [];
  if (RUNNING.has(state) && INSTANCE_RUNNING.has(instanceState)) offered.push("kill");
  if (FAILED.has(state) && INSTANCE_ENDED_BADLY.has(instanceState)) offered.push("force-success");
  if (TASK_ENDED.has(state) && INSTANCE_ENDED.has(instanceState)) offered.push("rerun");
  return offered;
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
  const { busy, error, run } = useAction(onDone);
  const offered = latest ? taskActions(task.state, instanceState) : [];
  if (offered.length === 0) return null;
  const act = (action: TaskAction) => {
    const body = action === "rerun" ? { downstream: true } : undefined;
    return run(() =>
      api.POST("/api/v1/task-instances/{id}/{action}", { params: { path: { id: task.id, action } }, body }),
    );
  };
  return (
    <span className="task-actions">
      {offered.map((action) => (
        <button
          key={action}
          className={action === "kill" ? "danger small" : "secondary small"}
          disabled={busy}
          aria-label={`${LABELS[action]} ${task.name}`}
          title={TITLES[action]}
          onClick={() => act(action)}
        >
          {LABELS[action]}
        </button>
      ))}
      {error && (
        <span role="alert" className="error">
          {error}
        </span>
      )}
    </span>
  );
}
