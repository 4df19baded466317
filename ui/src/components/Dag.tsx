// A workflow's DAG laid out top-down (dagre, or `layered` for large DAGs) and drawn with
// React Flow. The layout is computed from the structure only, so live state updates
// recolour without moving nodes.
import dagre from "@dagrejs/dagre";
import { Background, Controls, Handle, Position, ReactFlow, type Edge, type Node, type NodeProps } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { memo, useMemo, useState } from "react";
import { layered } from "./layers";
import { stateTone } from "./StateBadge";

export interface DagTask {
  /** Always set on a workflow's tasks (only a foreach's task template has none). */
  name?: string;
  type: string;
  depends_on?: string[] | null;
}

interface TaskNodeData extends Record<string, unknown> {
  name: string;
  type: string;
  state?: string;
}

export const WIDTH = 180;
export const HEIGHT = 48;
const GAP_X = 24;
const GAP_Y = 48;
/**
 * Above this many tasks the layout is `layered` (a few milliseconds for 1,000 tasks)
 * instead of dagre (most of a second, BENCHMARKS.md); dagre draws small DAGs tidier.
 */
export const FAST_LAYOUT_ABOVE = 200;

const TaskNode = memo(function TaskNode({ data }: NodeProps<Node<TaskNodeData>>) {
  return (
    <div className={`dag-node tone-${stateTone(data.state?.split(" · ")[0])}`}>
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <div className="dag-node-name">{data.name}</div>
      <div className="dag-node-meta">
        {data.type}
        {data.state ? ` · ${data.state}` : ""}
      </div>
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </div>
  );
});

const nodeTypes = { task: TaskNode };

interface Layout {
  nodes: Node<TaskNodeData>[];
  edges: Edge[];
}

/** Where each task is drawn; timed for the UI benchmark (bench/ui: layout time of large DAGs). */
function layout(all: DagTask[]): Layout {
  const start = performance.now();
  const tasks = all.map((t) => ({ ...t, name: t.name ?? "" }));
  const index = new Map(tasks.map((t, i) => [t.name, i]));
  const links: [number, number][] = [];
  const edges: Edge[] = [];
  tasks.forEach((t, i) => {
    for (const d of t.depends_on ?? []) {
      const from = index.get(d);
      if (from === undefined) continue;
      links.push([from, i]);
      edges.push({ id: `${d}->${t.name}`, source: d, target: t.name, focusable: false });
    }
  });
  const corners = place(tasks.length, links);
  const nodes = tasks.map((t, i) => ({
    id: t.name,
    type: "task",
    position: corners[i],
    data: { name: t.name, type: t.type },
    draggable: false,
    connectable: false,
  }));
  performance.measure("dag-layout", { start, detail: all.length });
  return { nodes, edges };
}

/**
 * The laid-out nodes with their states; a node whose state did not change keeps its object
 * from `before`, so React Flow redraws only the nodes that changed (a live 1,000-task
 * instance changes a few per second).
 */
function withStates(base: Layout, states: Record<string, string> | undefined, before: Node<TaskNodeData>[]) {
  const old = new Map(before.map((n) => [n.id, n]));
  return base.nodes.map((n) => {
    const state = states ? (states[n.id] ?? "not started") : undefined;
    const seen = old.get(n.id);
    return seen && seen.position === n.position && seen.data.state === state
      ? seen
      : { ...n, data: { ...n.data, state }, ariaLabel: states ? `${n.id}: ${state}` : `${n.id} (${n.data.type})` };
  });
}

/** A node's size where it is not the usual WIDTH × HEIGHT (the visual editor's groups). */
export interface Size {
  width: number;
  height: number;
}

/**
 * Top-left corner of each of `count` nodes linked by `links` (from, to), laid out
 * top-down; `sizes` are heeded by dagre (up to FAST_LAYOUT_ABOVE nodes).
 */
export function place(
  count: number,
  links: [number, number][],
  sizes?: (Size | undefined)[],
): { x: number; y: number }[] {
  return count > FAST_LAYOUT_ABOVE
    ? layered(count, links, { width: WIDTH, height: HEIGHT, gapX: GAP_X, gapY: GAP_Y })
    : withDagre(count, links, sizes);
}

/** Top-left corner of each node, laid out top-down by dagre. */
function withDagre(count: number, links: [number, number][], sizes?: (Size | undefined)[]) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: GAP_X, ranksep: GAP_Y });
  g.setDefaultEdgeLabel(() => ({}));
  const size = (i: number) => sizes?.[i] ?? { width: WIDTH, height: HEIGHT };
  for (let i = 0; i < count; i++) g.setNode(String(i), size(i));
  for (const [a, b] of links) g.setEdge(String(a), String(b));
  dagre.layout(g);
  return Array.from({ length: count }, (_, i) => {
    const p = g.node(String(i));
    return { x: p.x - size(i).width / 2, y: p.y - size(i).height / 2 };
  });
}

export function Dag({
  tasks,
  states,
  label = "DAG",
  onSelect,
  height = 420,
}: {
  tasks: DagTask[];
  /** Task name → state; when given, nodes are labelled "{task}: {state}". */
  states?: Record<string, string>;
  label?: string;
  onSelect?: (task: string) => void;
  height?: number;
}) {
  // The layout depends on the structure only, not on the tasks' objects.
  const structure = tasks.map((t) => `${t.name}<${(t.depends_on ?? []).join(",")}`).join(";");
  const base = useMemo(() => layout(tasks), [structure]); // eslint-disable-line react-hooks/exhaustive-deps
  // The nodes drawn last, updated as the layout or the states change.
  const [drawn, setDrawn] = useState(() => ({ base, states, nodes: withStates(base, states, []) }));
  let nodes = drawn.nodes;
  if (drawn.base !== base || drawn.states !== states) {
    nodes = withStates(base, states, drawn.nodes);
    setDrawn({ base, states, nodes });
  }
  return (
    <section className="dag" aria-label={label} style={{ height }}>
      <ReactFlow
        nodes={nodes}
        edges={base.edges}
        nodeTypes={nodeTypes}
        fitView
        minZoom={0.05}
        maxZoom={1.25}
        fitViewOptions={{ maxZoom: 1 }}
        nodesDraggable={false}
        nodesConnectable={false}
        onlyRenderVisibleElements={tasks.length > 200}
        onNodeClick={onSelect ? (_, n) => onSelect(n.id) : undefined}
      >
        <Background gap={16} size={1} />
        <Controls showInteractive={false} />
      </ReactFlow>
    </section>
  );
}
