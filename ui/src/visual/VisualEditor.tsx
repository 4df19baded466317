// Draw a workflow: a palette of task types dragged (or added by Enter) onto a canvas, edges
// drawn between handles, a form per task built from the definition's JSON Schema. Every
// action edits the YAML text the page holds (see ./definition), which the page validates
// as for the YAML view: the server's error is shown on the task it names. An edge is
// refused at once when it would close a cycle, or when the server refuses the workflow
// with it but not without it, with the server's reason.
import {
  Background,
  Controls,
  Handle,
  Position,
  ReactFlow,
  ReactFlowProvider,
  applyNodeChanges,
  useReactFlow,
  type Connection,
  type Edge,
  type Node,
  type NodeChange,
  type NodeProps,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { memo, useMemo, useState, type DragEvent, type KeyboardEvent } from "react";
import { $api } from "../api/cache";
import { ApiError, api, yaml } from "../api/client";
import { FAST_LAYOUT_ABOVE, HEIGHT, WIDTH } from "../components/Dag";
import type { Problem } from "../components/YamlEditor";
import { errorText } from "../components/format";
import {
  addTask,
  connect,
  cycleThrough,
  disconnect,
  freshName,
  read,
  removeTask,
  renameTask,
  setField,
  TOP,
  type FieldPath,
  type Task,
} from "./definition";
import { autoLayout, drawn, linked, loopBody, type TaskData } from "./nodes";
import type { WorkflowSchema } from "./schema";
import { TaskForm, TaskOptions, WorkflowForm } from "./TaskForm";

/** The drag payload of a palette entry: the task type. */
const MIME = "application/x-shoal-task-type";

function TaskNode({ data, selected }: NodeProps<Node<TaskData>>) {
  return (
    <div
      className={`dag-node tone-${data.problem ? "bad" : "none"}${selected ? " selected" : ""}${data.parent ? " inner" : ""}`}
      title={data.problem}
    >
      <Handle type="target" position={Position.Top} isConnectable={!data.fixed} aria-label={`${data.name} input`} />
      <div className="dag-node-name">{data.name}</div>
      <div className="dag-node-meta">
        {data.type}
        {data.body ? ` · ${data.body}` : ""}
      </div>
      <Handle type="source" position={Position.Bottom} isConnectable={!data.fixed} aria-label={`${data.name} output`} />
    </div>
  );
}

/** A do_while or foreach: its body's tasks are drawn inside it (as nodes of their own). */
function LoopNode({ data, selected }: NodeProps<Node<TaskData>>) {
  return (
    <div
      className={`dag-node loop tone-${data.problem ? "bad" : "none"}${selected ? " selected" : ""}`}
      title={data.problem}
    >
      <Handle type="target" position={Position.Top} aria-label={`${data.name} input`} />
      <div className="dag-node-name">{data.name}</div>
      <div className="dag-node-meta">
        {data.type === "do_while" ? "do_while · drop tasks in here" : `${data.type} · its task, read-only`}
      </div>
      <Handle type="source" position={Position.Bottom} aria-label={`${data.name} output`} />
    </div>
  );
}

const nodeTypes = { task: memo(TaskNode), loop: memo(LoopNode) };

/** Fields a new task of `type` starts with: a runnable placeholder where one is short. */
function starter(type: string, name: string): Task {
  if (type === "shell") return { name, type, command: `echo ${name}` };
  if (type === "python") return { name, type, script: `print("${name}")` };
  return { name, type };
}

/** A node's task and the list it is in (the workflow's, or a do_while's body). */
interface Where {
  name: string;
  scope: FieldPath;
  siblings: Task[];
  /** The do_while whose body it is in. */
  parent?: string;
}

/** Where the task of node `id` is (`{do_while}/{task}` for a body's); null for none. */
function where(id: string, tasks: Task[]): Where | null {
  const cut = id.indexOf("/");
  if (cut < 0) return tasks.some((t) => t.name === id) ? { name: id, scope: TOP, siblings: tasks } : null;
  const parent = id.slice(0, cut);
  const i = tasks.findIndex((t) => t.name === parent);
  const body = i < 0 ? undefined : loopBody(tasks[i]);
  const name = id.slice(cut + 1);
  if (!body?.some((b) => b.name === name)) return null;
  return { name, scope: ["tasks", i, "do_while", "tasks"], siblings: body, parent };
}

/** Why the server refuses `text`, or null when it takes it. */
async function refusal(project: string, text: string): Promise<string | null> {
  try {
    await api.POST("/api/v1/projects/{project}/validate", { params: { path: { project } }, ...yaml(text) });
    return null;
  } catch (e) {
    return e instanceof ApiError && e.status === 400 ? e.message : `not checked: ${errorText(e)}`;
  }
}

interface Props {
  project: string;
  /** The definition, YAML; every edit hands the new text to `onChange`. */
  text: string;
  onChange: (text: string) => void;
  /** The server's verdict on `text`. */
  problem: Problem | null;
}

export default function VisualEditor(props: Props) {
  return (
    <ReactFlowProvider>
      <Canvas {...props} />
    </ReactFlowProvider>
  );
}

function Canvas({ project, text, onChange, problem }: Props) {
  const schema = $api.useQuery("get", "/api/v1/schema/workflow", {}, { staleTime: Infinity });
  const root = schema.data as WorkflowSchema | undefined;
  const model = useMemo(() => read(text), [text]);
  const tasks = useMemo(() => ("tasks" in model ? model.tasks : []), [model]);
  const flow = useReactFlow();

  // Undo and redo: the texts before and after this one. A change made elsewhere (typed in
  // the YAML view) starts the history afresh rather than being undone unseen.
  const [past, setPast] = useState<string[]>([]);
  const [future, setFuture] = useState<string[]>([]);
  const [ours, setOurs] = useState(text);
  if (ours !== text) {
    setOurs(text);
    setPast([]);
    setFuture([]);
  }
  const [refused, setRefused] = useState("");
  const [selected, setSelected] = useState<string | null>(null);
  const at = selected ? where(selected, tasks) : null;
  const current = at?.siblings.find((t) => t.name === at.name) ?? null;

  const show = (next: string) => {
    setOurs(next);
    onChange(next);
  };
  const change = (next: string) => {
    if (next === text) return;
    setPast([...past.slice(-199), text]);
    setFuture([]);
    setRefused("");
    show(next);
  };
  const undo = () => {
    if (!past.length) return;
    setFuture([text, ...future]);
    setPast(past.slice(0, -1));
    show(past[past.length - 1]);
  };
  const redo = () => {
    if (!future.length) return;
    setPast([...past, text]);
    setFuture(future.slice(1));
    show(future[0]);
  };

  // Node positions are the canvas's own (not in the definition): kept by name, laid out as
  // the workflow page lays them out when the canvas opens.
  const [nodes, setNodes] = useState<Node<TaskData>[]>([]);
  const [drawnFor, setDrawnFor] = useState<{ tasks: Task[]; problem: Problem | null; selected: string | null }>();
  if (drawnFor?.tasks !== tasks || drawnFor.problem !== problem || drawnFor.selected !== selected) {
    setDrawnFor({ tasks, problem, selected });
    setNodes(drawn(nodes, tasks, problem, selected));
  }
  const [selectedEdge, setSelectedEdge] = useState<string | null>(null);
  const [edges, setEdges] = useState<Edge[]>([]);
  const [linkedFor, setLinkedFor] = useState<{ tasks: Task[]; selectedEdge: string | null }>();
  if (linkedFor?.tasks !== tasks || linkedFor.selectedEdge !== selectedEdge) {
    setLinkedFor({ tasks, selectedEdge });
    setEdges(linked(edges, tasks, selectedEdge));
  }

  const onNodesChange = (changes: NodeChange<Node<TaskData>>[]) => {
    for (const c of changes) if (c.type === "select") setSelected(c.selected ? c.id : (s) => (s === c.id ? null : s));
    // Removal goes through onDelete, as one change with the edges it takes along.
    setNodes((ns) =>
      applyNodeChanges(
        changes.filter((c) => c.type !== "remove" && c.type !== "select"),
        ns,
      ),
    );
  };

  /** Adds a task of `type` to the workflow (where dropped, or below the others), or to a do_while's body. */
  const place = (type: string, position?: { x: number; y: number }, loop?: string) => {
    const i = tasks.findIndex((t) => t.name === loop);
    if (loop && i >= 0) {
      const name = freshName(loopBody(tasks[i]) ?? [], type);
      change(addTask(text, starter(type, name), ["tasks", i, "do_while", "tasks"]));
      setSelected(`${loop}/${name}`);
      return;
    }
    const name = freshName(tasks, type);
    if (position) setNodes((ns) => [...ns, { id: name, type: "task", position, data: { name, type } }]);
    change(addTask(text, starter(type, name)));
    setSelected(name);
  };

  /** Draws source → target, both in one task list, unless the edge is refused. */
  const tryConnect = async (source: string, target: string, scope: FieldPath, siblings: Task[]) => {
    const next = connect(text, source, target, scope);
    if (next === text) return;
    const cycle = cycleThrough(siblings, source, target);
    // A cycle is refused whatever else is wrong; otherwise the server decides, when it
    // took the workflow before the edge (else its reason could be about something else).
    if (cycle || !problem) {
      const why = await refusal(project, next);
      if (why || cycle) {
        const reason = !problem && why ? why : `tasks would form a cycle: ${cycle!.join(" -> ")}`;
        setRefused(`Edge ${source} → ${target} refused: ${reason}`);
        return;
      }
    }
    change(next);
  };

  /** An edge drawn on the canvas between nodes `source` and `target`. */
  const drawEdge = (source: string, target: string) => {
    const from = where(source, tasks);
    const to = where(target, tasks);
    if (!from || !to || from.parent !== to.parent) {
      const label = (id: string) => id.replace("/", " in ");
      setRefused(
        `Edge ${label(source)} → ${label(target)} refused: tasks connect only within one list (the workflow's, or one do_while's body)`,
      );
      return;
    }
    void tryConnect(from.name, to.name, from.scope, from.siblings);
  };

  const onDrop = (e: DragEvent) => {
    const type = e.dataTransfer.getData(MIME);
    if (!type) return;
    e.preventDefault();
    const p = flow.screenToFlowPosition({ x: e.clientX, y: e.clientY });
    // Dropped on a do_while: into its body.
    const loop = flow
      .getIntersectingNodes({ x: p.x, y: p.y, width: 1, height: 1 })
      .find((n) => n.type === "loop" && (n.data as TaskData).type === "do_while");
    place(type, { x: p.x - WIDTH / 2, y: p.y - HEIGHT / 2 }, loop?.id);
  };

  // A large workflow opens on its first tasks at full size rather than on all of them as
  // specks: only the nodes in view are drawn, and each change redraws only those.
  const large = tasks.length > FAST_LAYOUT_ABOVE;
  const [fitOptions] = useState(() => ({
    maxZoom: 1,
    nodes: large ? tasks.slice(0, 20).map((t) => ({ id: t.name })) : undefined,
  }));

  const relayout = () => {
    const corners = autoLayout(tasks);
    setNodes((ns) => ns.map((n) => ({ ...n, position: corners.get(n.id) ?? n.position })));
    window.requestAnimationFrame(() => flow.fitView(fitOptions));
  };

  const keys = (e: KeyboardEvent) => {
    if (!(e.ctrlKey || e.metaKey) || (e.target as HTMLElement).closest("input, textarea, select")) return;
    const k = e.key.toLowerCase();
    if (k === "z" && !e.shiftKey) undo();
    else if (k === "y" || (k === "z" && e.shiftKey)) redo();
    else return;
    e.preventDefault();
  };

  if ("error" in model)
    return (
      <p role="alert" className="error">
        The visual editor needs a valid YAML mapping: {model.error}. Fix it in the YAML view.
      </p>
    );

  const setWorkflow = (path: FieldPath, value: unknown) => change(setField(text, null, path, value));
  const retype = (w: Where, task: Task, type: string) => {
    // The old type's own fields do not apply to the new one.
    const fields = root?.["x-task-fields"] ?? {};
    let next = text;
    for (const f of fields[task.type] ?? [])
      if (task[f] !== undefined && !(fields[type] ?? []).includes(f))
        next = setField(next, w.name, [f], undefined, w.scope);
    change(setField(next, w.name, ["type"], type, w.scope));
  };
  const rename = (w: Where, to: string) => {
    const id = w.parent ? `${w.parent}/${to}` : to;
    setNodes((ns) => ns.map((n) => (n.id === w.name && !w.parent ? { ...n, id } : n)));
    setSelected(id);
    change(renameTask(text, w.name, to, w.scope));
  };
  /** Removes tasks and edges: a body's tasks first, as removing a workflow's task renumbers the bodies. */
  const remove = (gone: string[], cut: Edge[]) => {
    let next = text;
    for (const e of cut) {
      const from = where(e.source, tasks);
      if (from) next = disconnect(next, from.name, where(e.target, tasks)?.name ?? "", from.scope);
    }
    const places = gone.map((id) => where(id, tasks)).filter((w) => w !== null);
    for (const w of [...places.filter((w) => w.parent), ...places.filter((w) => !w.parent)])
      next = removeTask(next, w.name, w.scope);
    if (selected && gone.includes(selected)) setSelected(null);
    change(next);
  };

  return (
    // Focusable (not a tab stop) so that a click on the canvas puts Ctrl+Z here.
    <div className="visual" tabIndex={-1} onKeyDown={keys}>
      <section className="palette" aria-label="Task types">
        <h2>Tasks</h2>
        <p className="muted">Drag onto the canvas, or press Enter.</p>
        {(root?.$defs.TaskDef.properties?.type.enum ?? []).map((type) => (
          <button
            key={type}
            type="button"
            className="secondary"
            draggable
            aria-label={`Add ${type} task`}
            onDragStart={(e) => {
              e.dataTransfer.setData(MIME, type);
              e.dataTransfer.effectAllowed = "copy";
            }}
            onClick={() => place(type)}
          >
            {type}
          </button>
        ))}
        {schema.error && <p className="error">{errorText(schema.error)}</p>}
      </section>
      <div className="canvas">
        <div className="row toolbar" role="toolbar" aria-label="Canvas">
          <button
            type="button"
            className="secondary"
            onClick={undo}
            disabled={!past.length}
            aria-keyshortcuts="Control+Z"
          >
            Undo
          </button>
          <button
            type="button"
            className="secondary"
            onClick={redo}
            disabled={!future.length}
            aria-keyshortcuts="Control+Shift+Z Control+Y"
          >
            Redo
          </button>
          <button type="button" className="secondary" onClick={relayout}>
            Auto-layout
          </button>
          <span className="muted">
            Drag from a task&apos;s bottom handle to another&apos;s top to connect; Delete removes the selection.
          </span>
        </div>
        {refused && (
          <p role="alert" className="error">
            {refused}
          </p>
        )}
        <section
          className="dag"
          aria-label="Workflow canvas"
          onDragOver={(e) => {
            if (e.dataTransfer.types.includes(MIME)) {
              e.preventDefault();
              e.dataTransfer.dropEffect = "copy";
            }
          }}
          onDrop={onDrop}
        >
          <ReactFlow
            nodes={nodes}
            edges={edges}
            nodeTypes={nodeTypes}
            onNodesChange={onNodesChange}
            onEdgesChange={(changes) => {
              for (const c of changes)
                if (c.type === "select") setSelectedEdge(c.selected ? c.id : (s) => (s === c.id ? null : s));
            }}
            onConnect={(c: Connection) => drawEdge(c.source, c.target)}
            onDelete={({ nodes: gone, edges: cut }) =>
              remove(
                gone.filter((n) => !n.data.fixed).map((n) => n.id),
                cut,
              )
            }
            deleteKeyCode={["Delete", "Backspace"]}
            fitView
            fitViewOptions={fitOptions}
            minZoom={0.05}
            maxZoom={1.5}
            onlyRenderVisibleElements={large}
          >
            <Background gap={16} size={1} />
            <Controls showInteractive={false} />
          </ReactFlow>
        </section>
      </div>
      <section className="taskform" aria-label="Properties">
        <label>
          Edit
          <select value={current ? selected! : ""} onChange={(e) => setSelected(e.target.value || null)}>
            <option value="">the workflow</option>
            <TaskOptions names={tasks.map((t) => t.name).join("\n")} prefix="task " />
            {tasks.flatMap((t) =>
              (loopBody(t) ?? []).map((b) => (
                <option key={`${t.name}/${b.name}`} value={`${t.name}/${b.name}`}>
                  task {b.name} in {t.name}
                </option>
              )),
            )}
          </select>
        </label>
        {!root ? (
          <p className="muted">Loading the definition&apos;s schema…</p>
        ) : current && at ? (
          <TaskForm
            root={root}
            task={current}
            tasks={at.siblings}
            place={at.parent}
            problem={problem?.task === current.name ? problem.message : undefined}
            set={(path, value) => change(setField(text, at.name, path, value, at.scope))}
            rename={(to) => rename(at, to)}
            retype={(type) => retype(at, current, type)}
            depend={(on, yes) =>
              yes
                ? void tryConnect(on, at.name, at.scope, at.siblings)
                : change(disconnect(text, on, at.name, at.scope))
            }
            addInside={
              current.type === "do_while" && !at.parent ? (type) => place(type, undefined, at.name) : undefined
            }
            remove={() => remove([selected!], [])}
          />
        ) : (
          <WorkflowForm root={root} def={model.def} set={setWorkflow} />
        )}
      </section>
    </div>
  );
}
