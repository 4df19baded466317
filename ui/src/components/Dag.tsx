// A workflow's DAG laid out top-down with dagre and drawn with React Flow. The layout is
// computed from the structure only, so live state updates recolour without moving nodes.
import dagre from "@dagrejs/dagre";
import { Background, Controls, Handle, Position, ReactFlow, type Edge, type Node, type NodeProps } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { memo, useMemo } from "react";
import { stateTone } from "./StateBadge";

export interface DagTask {
  name: string;
  type: string;
  depends_on?: string[] | null;
}

interface TaskNodeData extends Record<string, unknown> {
  name: string;
  type: string;
  state?: string;
}

const WIDTH = 180;
const HEIGHT = 48;

const TaskNode = memo(function TaskNode({ data }: NodeProps<Node<TaskNodeData>>) {
  return (
    <div className={`dag-node tone-${stateTone(data.state)}`}>
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

function layout(tasks: DagTask[]): { nodes: Node<TaskNodeData>[]; edges: Edge[] } {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 48 });
  g.setDefaultEdgeLabel(() => ({}));
  const names = new Set(tasks.map((t) => t.name));
  for (const t of tasks) g.setNode(t.name, { width: WIDTH, height: HEIGHT });
  const edges: Edge[] = [];
  for (const t of tasks) {
    for (const d of t.depends_on ?? []) {
      if (!names.has(d)) continue;
      g.setEdge(d, t.name);
      edges.push({ id: `${d}->${t.name}`, source: d, target: t.name, focusable: false });
    }
  }
  dagre.layout(g);
  const nodes = tasks.map((t) => {
    const p = g.node(t.name);
    return {
      id: t.name,
      type: "task",
      position: { x: p.x - WIDTH / 2, y: p.y - HEIGHT / 2 },
      data: { name: t.name, type: t.type },
      draggable: false,
      connectable: false,
    };
  });
  return { nodes, edges };
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
  const structure = tasks.map((t) => `${t.name}<${(t.depends_on ?? []).join(",")}`).join(";");
  // eslint-style note: `structure` is the layout's real dependency.
  const base = useMemo(() => {
    // Measured by the UI benchmark (bench/ui): layout time of large DAGs.
    const start = performance.now();
    const out = layout(tasks);
    performance.measure("dag-layout", { start, detail: tasks.length });
    return out;
  }, [structure]); // eslint-disable-line react-hooks/exhaustive-deps
  const nodes = useMemo(
    () =>
      base.nodes.map((n) => {
        const state = states ? (states[n.id] ?? "not started") : undefined;
        return {
          ...n,
          data: { ...n.data, state },
          ariaLabel: states ? `${n.id}: ${state}` : `${n.id} (${n.data.type})`,
        };
      }),
    [base, states],
  );
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
