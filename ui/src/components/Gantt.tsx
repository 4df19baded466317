// Every attempt as a bar on one time axis: retries show as further bars on their task's row.
import type { TaskInstance } from "../api/types";
import { stateTone } from "./StateBadge";
import { duration } from "./format";

export function Gantt({ tasks }: { tasks: TaskInstance[] }) {
  const started = tasks.filter((t) => t.started_at);
  if (started.length === 0)
    return (
      <section aria-label="Timeline" className="card muted">
        No attempt has started yet.
      </section>
    );
  const t0 = Math.min(...started.map((t) => Date.parse(t.started_at!)));
  // The axis ends with the last attempt, or now while one still runs (as of this render: the
  // page renders again when the instance changes).
  // eslint-disable-next-line react-hooks/purity -- the clock is what a running bar ends at
  const now = Date.now();
  const t1 = Math.max(...started.map((t) => (t.ended_at ? Date.parse(t.ended_at) : now)));
  const span = Math.max(1, t1 - t0);
  const names = [...new Set(tasks.map((t) => t.name))];
  return (
    <section aria-label="Timeline" className="card gantt">
      <h2>Timeline</h2>
      <div className="gantt-axis muted">
        <span>0 s</span>
        <span>{(span / 1000).toFixed(1)} s</span>
      </div>
      {names.map((name) => (
        <div className="gantt-row" key={name}>
          <div className="gantt-name" title={name}>
            {name}
          </div>
          <div className="gantt-track">
            {started
              .filter((t) => t.name === name)
              .map((t) => {
                const s = Date.parse(t.started_at!) - t0;
                const e = (t.ended_at ? Date.parse(t.ended_at) : now) - t0;
                return (
                  <div
                    key={t.id}
                    className={`gantt-bar tone-${stateTone(t.state)}`}
                    style={{ left: `${(s / span) * 100}%`, width: `max(3px, ${((e - s) / span) * 100}%)` }}
                    title={`${name} attempt ${t.attempt}: ${t.state}, ${duration(t.started_at, t.ended_at)}`}
                    aria-label={`${name} attempt ${t.attempt}: ${t.state}`}
                    role="img"
                  />
                );
              })}
          </div>
        </div>
      ))}
    </section>
  );
}
