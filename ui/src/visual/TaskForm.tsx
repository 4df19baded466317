// The side form of the visual editor: a task's name, type and dependencies, the fields its
// type has of its own, then those every task has; or, with no task chosen, the workflow's.
import { memo, useState } from "react";
import type { Task } from "./definition";
import { Fields, type SetField } from "./Fields";
import type { WorkflowSchema } from "./schema";

/** Fields with a control of their own in the task form. */
const HEAD = new Set(["name", "type", "depends_on"]);

/** The fields most definitions set come first; the others follow by name. */
const FIRST = [
  "name",
  "description",
  "params",
  "retries",
  "retry_interval",
  "timeout",
  "timeout_strategy",
  "priority",
  "worker_group",
  "on_error",
];
const rank = (k: string) => (FIRST.includes(k) ? FIRST.indexOf(k) : FIRST.length);
const ordered = (keys: string[]) => [...keys].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));

/**
 * An option per task name, the names joined by newlines: an edit that keeps them (most do)
 * does not redraw a thousand options.
 */
export const TaskOptions = memo(function TaskOptions({ names, prefix = "" }: { names: string; prefix?: string }) {
  return names
    ? names.split("\n").map((n) => (
        <option key={n} value={n}>
          {prefix}
          {n}
        </option>
      ))
    : null;
});

export function TaskForm({
  root,
  task,
  tasks,
  place,
  problem,
  set,
  rename,
  retype,
  depend,
  addInside,
  remove,
}: {
  root: WorkflowSchema;
  task: Task;
  /** The tasks of its list (the workflow's, or its do_while's body). */
  tasks: Task[];
  /** The do_while whose body it is in. */
  place?: string;
  /** The server's error about this task. */
  problem?: string;
  set: SetField;
  rename: (to: string) => void;
  retype: (type: string) => void;
  /** Makes the task depend on `on`, or not. */
  depend: (on: string, yes: boolean) => void;
  /** A do_while's: adds a task of a type to its body (what dropping one on it does). */
  addInside?: (type: string) => void;
  remove: () => void;
}) {
  const schema = root.$defs.TaskDef;
  const byType = root["x-task-fields"];
  const own = byType[task.type] ?? [];
  const ofTypes = new Set(Object.values(byType).flat());
  const common = ordered(Object.keys(schema.properties ?? {}).filter((k) => !HEAD.has(k) && !ofTypes.has(k)));
  // The form stays mounted from one task to the next (a thousand options are not made
  // again); an error about a name belongs to the task it was typed for.
  const [named, setNamed] = useState({ task: task.name, error: "" });
  const nameError = named.task === task.name ? named.error : "";
  const setNameError = (error: string) => setNamed({ task: task.name, error });
  const deps = task.depends_on ?? [];

  const commitName = (to: string) => {
    to = to.trim();
    if (to === task.name) return setNameError("");
    if (!to) return setNameError("A task needs a name.");
    if (tasks.some((t) => t.name === to)) return setNameError(`Another task is named ${to}.`);
    setNameError("");
    rename(to);
  };

  return (
    <form aria-label={`Task ${task.name}`} onSubmit={(e) => e.preventDefault()}>
      <h2>
        Task {task.name}
        {place && <span className="muted"> in {place}</span>}
      </h2>
      {problem && (
        <p className="error" id="task-problem">
          {problem}
        </p>
      )}
      <label>
        name
        <input
          key={task.name}
          defaultValue={task.name}
          aria-invalid={!!nameError}
          onBlur={(e) => commitName(e.target.value)}
          onKeyDown={(e) => e.key === "Enter" && (e.preventDefault(), e.currentTarget.blur())}
        />
      </label>
      {nameError && <p className="error">{nameError}</p>}
      <label>
        type
        <select value={task.type} onChange={(e) => retype(e.target.value)}>
          {(schema.properties?.type.enum ?? []).map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </label>
      <fieldset>
        <legend>depends on</legend>
        {deps.map((d) => (
          <label key={d} className="check">
            <input type="checkbox" checked onChange={() => depend(d, false)} />
            {d}
          </label>
        ))}
        {/* A list, not a checkbox per task: a workflow may have thousands. */}
        <select aria-label="Add dependency" value="" onChange={(e) => e.target.value && depend(e.target.value, true)}>
          <option value="">add a dependency…</option>
          <TaskOptions
            names={tasks
              .filter((t) => t.name !== task.name && !deps.includes(t.name))
              .map((t) => t.name)
              .join("\n")}
          />
        </select>
      </fieldset>
      {own.length === 1 && own[0] === task.type ? (
        // The type's one section (`http`, `do_while`, …) is a fieldset of its own.
        <Fields
          key={`${place ?? ""}/${task.name}`}
          root={root}
          schema={schema}
          keys={own}
          value={task}
          path={[]}
          set={set}
        />
      ) : (
        own.length > 0 && (
          <fieldset>
            <legend>{task.type} settings</legend>
            <Fields
              key={`${place ?? ""}/${task.name}`}
              root={root}
              schema={schema}
              keys={own}
              value={task}
              path={[]}
              set={set}
            />
          </fieldset>
        )
      )}
      <fieldset>
        <legend>every task</legend>
        <Fields
          key={`${place ?? ""}/${task.name}`}
          root={root}
          schema={schema}
          keys={common}
          value={task}
          path={[]}
          set={set}
        />
      </fieldset>
      {addInside && (
        <label>
          add a task to its body
          <select value="" onChange={(e) => e.target.value && addInside(e.target.value)}>
            <option value="">type…</option>
            {(schema.properties?.type.enum ?? []).map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </label>
      )}
      <button type="button" className="danger" onClick={remove}>
        Delete task {task.name}
      </button>
    </form>
  );
}

export function WorkflowForm({
  root,
  def,
  set,
}: {
  root: WorkflowSchema;
  def: Record<string, unknown>;
  set: SetField;
}) {
  const keys = ordered(Object.keys(root.properties ?? {}).filter((k) => k !== "tasks"));
  return (
    <form aria-label="Workflow" onSubmit={(e) => e.preventDefault()}>
      <h2>Workflow</h2>
      <p className="muted">Select a task on the canvas (Tab to it, then Enter) or above to edit it.</p>
      <Fields root={root} schema={root} keys={keys} value={def} path={[]} set={set} />
    </form>
  );
}
