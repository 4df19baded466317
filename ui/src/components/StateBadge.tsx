/** A state as its lowercase word, coloured by what it means. */
export function stateTone(state: string | undefined): string {
  switch (state) {
    case "success":
    case "forced_success":
      return "ok";
    case "failure":
    case "need_fault_tolerance":
      return "bad";
    case "running":
    case "dispatched":
    case "submitted":
    case "ready_pause":
    case "ready_stop":
      return "busy";
    case "paused":
    case "delayed":
    case "serial_wait":
    case "waiting_task_group":
    case "waiting":
      return "wait";
    case "killed":
    case "stopped":
    case "skipped":
      return "off";
    default:
      return "none";
  }
}

export function StateBadge({ state, label }: { state: string; label?: string }) {
  return (
    <span className={`badge tone-${stateTone(state)}`} role={label ? "status" : undefined} aria-label={label}>
      {state}
    </span>
  );
}
