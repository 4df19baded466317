// The visual editor's model is the YAML text itself: every canvas or form action parses it
// into a YAML document, changes that document and prints it again. A field the editor has
// no widget for, a comment, the order of keys and flow style are kept, so switching between
// the views loses nothing. Nothing here touches the DOM (the round-trip test runs it in node).
import { isMap, isScalar, isSeq, parse, parseDocument, stringify, type Document } from "yaml";

/** A task as the definition has it; fields beyond these are kept as they are. */
export interface Task {
  name: string;
  type: string;
  depends_on?: string[];
  [field: string]: unknown;
}

/** A field's place in the definition: keys and sequence indexes from the root. */
export type FieldPath = (string | number)[];

/**
 * The last text parsed or printed, with its document: an edit changes that document in
 * place and prints it, and reading the printed text takes it from here, so an edit of a
 * 1,000-task definition does not parse it twice (some 70 ms each).
 */
let last: { text: string; doc: Document } | null = null;

function documentOf(text: string): Document {
  if (last?.text !== text) last = { text, doc: parseDocument(text) };
  return last.doc;
}

/** The definition as plain data, or why the text is not a YAML mapping with a task list. */
export function read(text: string): { def: Record<string, unknown>; tasks: Task[] } | { error: string } {
  const doc = documentOf(text);
  if (doc.errors.length) return { error: doc.errors[0].message };
  const def = doc.toJS() as unknown;
  if (!def || typeof def !== "object" || Array.isArray(def)) return { error: "the definition is not a YAML mapping" };
  const raw = (def as Record<string, unknown>).tasks ?? [];
  if (!Array.isArray(raw)) return { error: "`tasks` is not a list" };
  const tasks = raw.map((t) => {
    const task = (t && typeof t === "object" ? t : {}) as Task;
    return { ...task, name: String(task.name ?? ""), type: String(task.type ?? "") };
  });
  return { def: def as Record<string, unknown>, tasks };
}

/** `text` changed by `change`, printed again. */
function edit(text: string, change: (doc: Document) => void): string {
  const doc = documentOf(text);
  if (doc.errors.length) throw new Error(doc.errors[0].message);
  last = null; // changed below: it no longer is `text`'s
  change(doc);
  const out = doc.toString({ lineWidth: 0, flowCollectionPadding: false });
  last = { text: out, doc };
  return out;
}

function taskIndex(doc: Document, name: string): number {
  const tasks = doc.get("tasks");
  if (!isSeq(tasks)) return -1;
  return tasks.items.findIndex((t) => isMap(t) && String(t.get("name")) === name);
}

/** A task name not used yet: `{base}_1`, `{base}_2`, … */
export function freshName(tasks: Task[], base: string): string {
  const used = new Set(tasks.map((t) => t.name));
  for (let i = 1; ; i++) if (!used.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** Appends a task (its fields in the given order). */
export function addTask(text: string, task: Task): string {
  return edit(text, (doc) => {
    if (!isSeq(doc.get("tasks"))) doc.set("tasks", doc.createNode([]));
    doc.addIn(["tasks"], doc.createNode(task));
  });
}

/** Removes a task and every dependency on it. */
export function removeTask(text: string, name: string): string {
  return edit(text, (doc) => {
    const i = taskIndex(doc, name);
    if (i < 0) return;
    doc.deleteIn(["tasks", i]);
    const tasks = doc.get("tasks");
    if (!isSeq(tasks)) return;
    tasks.items.forEach((_, j) => dropDependency(doc, j, name));
  });
}

function dependencies(doc: Document, i: number): string[] {
  const d = doc.getIn(["tasks", i, "depends_on"]);
  return isSeq(d) ? d.items.map((x) => String(isScalar(x) ? x.value : x)) : [];
}

function dropDependency(doc: Document, i: number, name: string) {
  const deps = dependencies(doc, i);
  const at = deps.indexOf(name);
  if (at < 0) return;
  if (deps.length === 1) doc.deleteIn(["tasks", i, "depends_on"]);
  else doc.deleteIn(["tasks", i, "depends_on", at]);
}

/** `target` depends on `source` (an edge source → target); unchanged if it already does. */
export function connect(text: string, source: string, target: string): string {
  return edit(text, (doc) => {
    const i = taskIndex(doc, target);
    if (i < 0 || dependencies(doc, i).includes(source)) return;
    if (isSeq(doc.getIn(["tasks", i, "depends_on"]))) doc.addIn(["tasks", i, "depends_on"], source);
    else doc.setIn(["tasks", i, "depends_on"], doc.createNode([source], { flow: true }));
  });
}

/** `target` no longer depends on `source`. */
export function disconnect(text: string, source: string, target: string): string {
  return edit(text, (doc) => {
    const i = taskIndex(doc, target);
    if (i >= 0) dropDependency(doc, i, source);
  });
}

/** Empty values are left out of the definition, so its defaults apply. */
function empty(value: unknown): boolean {
  if (value === undefined || value === null || value === "") return true;
  if (Array.isArray(value)) return value.length === 0;
  return typeof value === "object" && Object.keys(value).length === 0;
}

/**
 * Sets a field of task `name` (or of the workflow when `name` is null); an empty value
 * removes it, and a section left empty by that goes too.
 */
export function setField(text: string, name: string | null, path: FieldPath, value: unknown): string {
  return edit(text, (doc) => {
    let base: FieldPath = [];
    if (name !== null) {
      const i = taskIndex(doc, name);
      if (i < 0) return;
      base = ["tasks", i];
    }
    const full = [...base, ...path];
    if (!empty(value)) {
      doc.setIn(full, doc.createNode(value));
      return;
    }
    doc.deleteIn(full);
    for (let n = full.length - 1; n > base.length; n--) {
      const parent = doc.getIn(full.slice(0, n));
      if ((isMap(parent) || isSeq(parent)) && parent.items.length === 0) doc.deleteIn(full.slice(0, n));
      else break;
    }
  });
}

/**
 * Renames a task, and every reference to it: dependencies, branch targets (conditions,
 * switch, on_timeout) and catch handlers.
 */
export function renameTask(text: string, from: string, to: string): string {
  return edit(text, (doc) => {
    const tasks = doc.get("tasks");
    if (!isSeq(tasks)) return;
    const swap = (path: FieldPath) => {
      if (doc.getIn(path) === from) doc.setIn(path, to);
    };
    tasks.items.forEach((_, i) => {
      swap(["tasks", i, "name"]);
      for (const list of [["depends_on"], ["conditions", "success"], ["conditions", "failure"]]) {
        const seq = doc.getIn(["tasks", i, ...list]);
        if (isSeq(seq)) seq.items.forEach((_, j) => swap(["tasks", i, ...list, j]));
      }
      const cases = doc.getIn(["tasks", i, "switch", "cases"]);
      if (isSeq(cases)) cases.items.forEach((_, j) => swap(["tasks", i, "switch", "cases", j, "then"]));
      swap(["tasks", i, "switch", "default"]);
      swap(["tasks", i, "on_timeout"]);
      swap(["tasks", i, "on_error", "then"]);
    });
  });
}

/** The first cycle the edge source → target would close: [source, …, target, source]. */
export function cycleThrough(tasks: Task[], source: string, target: string): string[] | null {
  // A cycle exists if source is reachable from target along dependency edges (d → t).
  const downstream = new Map<string, string[]>();
  for (const t of tasks) for (const d of t.depends_on ?? []) downstream.set(d, [...(downstream.get(d) ?? []), t.name]);
  const path = [target];
  const seen = new Set<string>();
  const walk = (at: string): boolean => {
    if (at === source) return true;
    if (seen.has(at)) return false;
    seen.add(at);
    for (const next of downstream.get(at) ?? []) {
      path.push(next);
      if (walk(next)) return true;
      path.pop();
    }
    return false;
  };
  return walk(target) ? [source, ...path] : null;
}

/** A value as a YAML fragment, for the fields edited as text. */
export function fragment(value: unknown): string {
  return value === undefined ? "" : stringify(value, { lineWidth: 0, flowCollectionPadding: false }).trimEnd();
}

/** A YAML fragment's value; throws the parser's message. */
export function parseFragment(text: string): unknown {
  return text.trim() ? parse(text) : undefined;
}
