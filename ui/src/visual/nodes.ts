// The canvas's nodes and edges from the definition's tasks. A do_while's body is drawn
// inside its task as a group whose tasks are edited as the workflow's are (their node ids
// are `{do_while}/{task}`); a foreach's task template is drawn inside its task read-only
// (edited in the foreach's form). Positions are the canvas's own, kept by name; a group's
// tasks are laid out inside it.
import type { Edge, Node } from "@xyflow/react";
import { HEIGHT, WIDTH, place, type Size } from "../components/Dag";
import type { Problem } from "../components/YamlEditor";
import type { Task } from "./definition";

export interface TaskData extends Record<string, unknown> {
  name: string;
  type: string;
  /** The server's error about this task. */
  problem?: string;
  /** What a foreach runs when it is not drawn inside it (another workflow). */
  body?: string;
  /** The do_while or foreach whose body the task is in. */
  parent?: string;
  /** A foreach's task template: shown, not edited on the canvas. */
  fixed?: boolean;
}

type XY = { x: number; y: number };

/** Room around a group's body, and for its title above it. */
const PAD = 12;
const TITLE = 40;

/** A do_while's body: tasks edited on the canvas like the workflow's. */
export function loopBody(t: Task): Task[] | undefined {
  const loop = t.do_while as { tasks?: Task[] } | undefined;
  return Array.isArray(loop?.tasks) ? named(loop.tasks) : undefined;
}

function named(tasks: Task[]): Task[] {
  return tasks.map((b) => ({ ...b, name: String(b?.name ?? ""), type: String(b?.type ?? "") }));
}

/** The tasks drawn inside `t`: a do_while's body, or a foreach's template (named `each`). */
function body(t: Task): Task[] {
  const each = t.foreach as { task?: Task } | undefined;
  return loopBody(t) ?? (each?.task ? named([{ ...each.task, name: "each" }]) : []);
}

/** Corners of `tasks` (linked by their depends_on) laid out top-down from (0, 0). */
function corners(tasks: Task[], sizes?: (Size | undefined)[]): XY[] {
  const index = new Map(tasks.map((t, i) => [t.name, i]));
  const links: [number, number][] = [];
  tasks.forEach((t, i) =>
    (t.depends_on ?? []).forEach((d) => index.has(d) && links.push([index.get(d)!, i] as [number, number])),
  );
  return place(tasks.length, links, sizes);
}

/** A group's size and where its body's tasks go inside it; none for a task without a body. */
function group(t: Task): { size: Size; inner: Task[]; at: XY[] } | undefined {
  const inner = body(t);
  if (!inner.length) return undefined;
  const at = corners(inner).map((c) => ({ x: c.x + PAD, y: c.y + TITLE }));
  const width = Math.max(WIDTH, ...at.map((c) => c.x + WIDTH + PAD));
  const height = Math.max(...at.map((c) => c.y + HEIGHT + PAD));
  return { size: { width, height }, inner, at };
}

/** Top-left corners of the tasks laid out top-down, as the workflow page draws them. */
export function autoLayout(tasks: Task[]): Map<string, XY> {
  const at = corners(
    tasks,
    tasks.map((t) => group(t)?.size),
  );
  return new Map(tasks.map((t, i) => [t.name, at[i]]));
}

/**
 * The nodes of `tasks`, each group followed by its body's: where a node was (`before`) it
 * stays, and an unchanged node keeps its object, so React Flow redraws only the nodes that
 * changed (every edit parses the whole definition again). The first drawing is laid out; a
 * task added without a place goes below the others.
 */
export function drawn(
  before: Node<TaskData>[],
  tasks: Task[],
  problem: Problem | null,
  selected: string | null,
): Node<TaskData>[] {
  const old = new Map(before.map((n) => [n.id, n]));
  const groups = new Map(tasks.map((t) => [t.name, group(t)]));
  // A group that grew (or shrank) moves the nodes below it by as much.
  const resized = tasks.flatMap((t) => {
    const was = old.get(t.name);
    const by = (groups.get(t.name)?.size.height ?? HEIGHT) - (was?.height ?? HEIGHT);
    return was && by ? [{ below: was.position.y + (was.height ?? HEIGHT), by }] : [];
  });
  const moved = (p: XY) => {
    const by = resized.filter((r) => p.y >= r.below).reduce((sum, r) => sum + r.by, 0);
    return by ? { x: p.x, y: p.y + by } : p;
  };
  const placeAll = before.length === 0 ? autoLayout(tasks) : null;
  let lowest = Math.max(0, ...before.map((n) => n.position.y + (n.height ?? HEIGHT) + 48));
  return tasks.flatMap((t) => {
    const was = old.get(t.name);
    let position = was ? moved(was.position) : placeAll?.get(t.name);
    if (!position) {
      position = { x: 0, y: lowest };
      lowest += HEIGHT + 48;
    }
    const g = groups.get(t.name);
    const size = g?.size ?? { width: WIDTH, height: HEIGHT };
    const bad = problem?.task === t.name ? problem.message : undefined;
    const workflow = (t.foreach as { workflow?: string } | undefined)?.workflow;
    const data: TaskData = { name: t.name, type: t.type, problem: bad, body: workflow && `runs ${workflow}` };
    const isSelected = t.name === selected;
    const same =
      was &&
      was.position === position &&
      was.width === size.width &&
      was.height === size.height &&
      !!was.selected === isSelected &&
      (Object.keys(data) as (keyof TaskData)[]).every((k) => was.data[k] === data[k]);
    const node: Node<TaskData> = same
      ? was
      : {
          ...was,
          id: t.name,
          type: g ? "loop" : "task",
          position,
          ...size,
          selected: isSelected,
          ariaLabel: `${t.name} (${t.type})${bad ? `: ${bad}` : ""}`,
          data,
        };
    if (!g) return [node];
    const fixed = t.type !== "do_while";
    return [
      node,
      ...g.inner.map((b, i) => {
        const id = `${t.name}/${b.name}`;
        const bad = problem?.task === b.name ? problem.message : undefined;
        return {
          id,
          type: "task",
          parentId: t.name,
          extent: "parent" as const,
          position: g.at[i],
          width: WIDTH,
          height: HEIGHT,
          draggable: false,
          selectable: !fixed,
          connectable: !fixed,
          deletable: !fixed,
          focusable: !fixed,
          selected: id === selected,
          ariaLabel: `${b.name} (${b.type}) in ${t.name}${bad ? `: ${bad}` : ""}`,
          data: { name: b.name, type: b.type, problem: bad, parent: t.name, fixed },
        };
      }),
    ];
  });
}

/**
 * The edges of `tasks` (dependency → task), and of their groups' bodies (read-only); an
 * unchanged edge keeps its object from `before`.
 */
export function linked(before: Edge[], tasks: Task[], selectedEdge: string | null): Edge[] {
  const old = new Map(before.map((e) => [e.id, e]));
  const names = new Set(tasks.map((t) => t.name));
  const edge = (source: string, target: string, label: string, fixed: boolean): Edge => {
    const id = `${source}->${target}`;
    const selected = !fixed && id === selectedEdge;
    const was = old.get(id);
    if (was && !!was.selected === selected) return was;
    return fixed
      ? { id, source, target, ariaLabel: label, deletable: false, selectable: false, focusable: false }
      : { id, source, target, ariaLabel: label, selected };
  };
  return tasks.flatMap((t) => [
    ...(t.depends_on ?? []).filter((d) => names.has(d)).map((d) => edge(d, t.name, `${d} → ${t.name}`, false)),
    ...body(t).flatMap((b, _, inner) =>
      (b.depends_on ?? [])
        .filter((d) => inner.some((o) => o.name === d))
        .map((d) =>
          edge(`${t.name}/${d}`, `${t.name}/${b.name}`, `${d} → ${b.name} in ${t.name}`, t.type !== "do_while"),
        ),
    ),
  ]);
}
