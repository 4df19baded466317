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
  type FieldPath,
  type Task,
} from "./definition";
import { autoLayout, drawn, linked, type TaskData } from "./nodes";
import type { WorkflowSchema } from "./schema";
import { TaskForm, TaskOptions, WorkflowForm } from "./TaskForm";

/** The drag payload of a palette entry: the task type. */
const MIME = "application/x-shoal-task-type";

function TaskNode({ data, selected }: NodeProps<Node<TaskData>>) {
  return (
    <div
      className={`dag-node tone-${data.problem ? "bad" : "none"}${selected ? " selected" : ""}${data.inner ? " inner" : ""}`}
      title={data.problem}
    >
      <Handle type="target" position={Position.Top} isConnectable={!data.inner} aria-label={`${data.name} input`} />
      <div className="dag-node-name">{data.name}</div>
      <div className="dag-node-meta">
        {data.type}
        {data.body ? ` · ${data.body}` : ""}
      </div>
      <Handle type="source" position={Position.Bottom} isConnectable={!data.inner} aria-label={`${data.name} output`} />
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
      <div className="dag-node-meta">{data.type} · body read-only here</div>
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
  const current = tasks.find((t) => t.name === selected) ?? null;

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

  const place = (type: string, position?: { x: number; y: number }) => {
    const name = freshName(tasks, type);
    if (position) setNodes((ns) => [...ns, { id: name, type: "task", position, data: { name, type } }]);
    change(addTask(text, starter(type, name)));
    setSelected(name);
  };

  const tryConnect = async (source: string, target: string) => {
    const next = connect(text, source, target);
    if (next === text) return;
    const cycle = cycleThrough(tasks, source, target);
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

  const onDrop = (e: DragEvent) => {
    const type = e.dataTransfer.getData(MIME);
    if (!type) return;
    e.preventDefault();
    const p = flow.screenToFlowPosition({ x: e.clientX, y: e.clientY });
    place(type, { x: p.x - WIDTH / 2, y: p.y - HEIGHT / 2 });
  };

  // A large workflow opens on its first tasks at full size rather than on all of them as
  // specks: only the nodes in view are drawn, and each change redraws only those.
  const large = tasks.length > FAST_LAYOUT_ABOVE;
  const [fitOptions] = useState(() => ({
    maxZoom: 1,
    nodes: large ? tasks.slice(0, 20).map((t) => ({ id: t.name })) : undefined,
  }));

  const relayout = () => {
    const at = autoLayout(tasks);
    setNodes((ns) => ns.map((n) => ({ ...n, position: at.get(n.id) ?? n.position })));
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

  const set = (task: string | null) => (path: FieldPath, value: unknown) => change(setField(text, task, path, value));
  const retype = (task: Task, type: string) => {
    // The old type's own fields do not apply to the new one.
    const fields = root?.["x-task-fields"] ?? {};
    let next = text;
    for (const f of fields[task.type] ?? [])
      if (task[f] !== undefined && !(fields[type] ?? []).includes(f)) next = setField(next, task.name, [f], undefined);
    change(setField(next, task.name, ["type"], type));
  };
  const rename = (from: string, to: string) => {
    setNodes((ns) => ns.map((n) => (n.id === from ? { ...n, id: to } : n)));
    setSelected(to);
    change(renameTask(text, from, to));
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
            onConnect={(c: Connection) => void tryConnect(c.source, c.target)}
            onDelete={({ nodes: gone, edges: cut }) => {
              let next = text;
              for (const e of cut) next = disconnect(next, e.source, e.target);
              for (const n of gone) if (!n.data.inner) next = removeTask(next, n.id);
              if (gone.some((n) => n.id === selected)) setSelected(null);
              change(next);
            }}
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
          <select value={current?.name ?? ""} onChange={(e) => setSelected(e.target.value || null)}>
            <option value="">the workflow</option>
            <TaskOptions names={tasks.map((t) => t.name).join("\n")} prefix="task " />
          </select>
        </label>
        {!root ? (
          <p className="muted">Loading the definition&apos;s schema…</p>
        ) : current ? (
          <TaskForm
            key={current.name}
            root={root}
            task={current}
            tasks={tasks}
            problem={problem?.task === current.name ? problem.message : undefined}
            set={set(current.name)}
            rename={rename}
            retype={(type) => retype(current, type)}
            depend={(on, yes) => (yes ? void tryConnect(on, current.name) : change(disconnect(text, on, current.name)))}
            remove={() => {
              setSelected(null);
              change(removeTask(text, current.name));
            }}
          />
        ) : (
          <WorkflowForm root={root} def={model.def} set={set(null)} />
        )}
      </section>
    </div>
  );
}
