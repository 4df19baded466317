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
 * The task list an operation works in: the workflow's (`["tasks"]`), or a do_while's body
 * (`["tasks", i, "do_while", "tasks"]`). Dependencies stay within one list.
 */
export const TOP: FieldPath = ["tasks"];

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
  // An empty text is an empty definition, to draw one from scratch.
  const def = (doc.toJS() ?? {}) as unknown;
  if (typeof def !== "object" || Array.isArray(def)) return { error: "the definition is not a YAML mapping" };
  const raw = (def as Record<string, unknown>).tasks ?? [];
  if (!Array.isArray(raw)) return { error: "`tasks` is not a list" };
  const tasks = raw.map((t) => {
    const task = (t && typeof t === "object" ? t : {}) as Task;
    return { ...task, name: String(task.name ?? ""), type: String(task.type ?? "") };
  });
  return { def: def as Record<string, unknown>, tasks };
}

/**
 * Whether `text` mostly writes flow collections with spaces inside (`{ a: 1 }`, not
 * `{a: 1}`): the printer takes one style for the whole document.
 */
function padded(text: string): boolean {
  return (text.match(/[[{] /g)?.length ?? 0) > (text.match(/[[{][^\s\]}]/g)?.length ?? 0);
}

/** `text` changed by `change`, printed again. */
function edit(text: string, change: (doc: Document) => void): string {
  const doc = documentOf(text);
  if (doc.errors.length) throw new Error(doc.errors[0].message);
  last = null; // changed below: it no longer is `text`'s
  change(doc);
  const out = doc.toString({ lineWidth: 0, flowCollectionPadding: padded(text) });
  last = { text: out, doc };
  return out;
}

function taskIndex(doc: Document, name: string, scope: FieldPath): number {
  const tasks = doc.getIn(scope);
  if (!isSeq(tasks)) return -1;
  return tasks.items.findIndex((t) => isMap(t) && String(t.get("name")) === name);
}

/** A task name not used yet: `{base}_1`, `{base}_2`, … */
export function freshName(tasks: Task[], base: string): string {
  const used = new Set(tasks.map((t) => t.name));
  for (let i = 1; ; i++) if (!used.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** Appends a task (its fields in the given order). */
export function addTask(text: string, task: Task, scope = TOP): string {
  return edit(text, (doc) => {
    if (!isSeq(doc.getIn(scope))) doc.setIn(scope, doc.createNode([]));
    doc.addIn(scope, doc.createNode(task));
  });
}

/** Removes a task and every dependency on it. */
export function removeTask(text: string, name: string, scope = TOP): string {
  return edit(text, (doc) => {
    const i = taskIndex(doc, name, scope);
    if (i < 0) return;
    doc.deleteIn([...scope, i]);
    const tasks = doc.getIn(scope);
    if (!isSeq(tasks)) return;
    tasks.items.forEach((_, j) => dropDependency(doc, [...scope, j], name));
  });
}

function dependencies(doc: Document, task: FieldPath): string[] {
  const d = doc.getIn([...task, "depends_on"]);
  return isSeq(d) ? d.items.map((x) => String(isScalar(x) ? x.value : x)) : [];
}

function dropDependency(doc: Document, task: FieldPath, name: string) {
  const deps = dependencies(doc, task);
  const at = deps.indexOf(name);
  if (at < 0) return;
  if (deps.length === 1) doc.deleteIn([...task, "depends_on"]);
  else doc.deleteIn([...task, "depends_on", at]);
}

/** `target` depends on `source` (an edge source → target); unchanged if it already does. */
export function connect(text: string, source: string, target: string, scope = TOP): string {
  return edit(text, (doc) => {
    const i = taskIndex(doc, target, scope);
    if (i < 0 || dependencies(doc, [...scope, i]).includes(source)) return;
    const deps = [...scope, i, "depends_on"];
    if (isSeq(doc.getIn(deps))) doc.addIn(deps, source);
    else doc.setIn(deps, doc.createNode([source], { flow: true }));
  });
}

/** `target` no longer depends on `source`. */
export function disconnect(text: string, source: string, target: string, scope = TOP): string {
  return edit(text, (doc) => {
    const i = taskIndex(doc, target, scope);
    if (i >= 0) dropDependency(doc, [...scope, i], source);
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
export function setField(text: string, name: string | null, path: FieldPath, value: unknown, scope = TOP): string {
  return edit(text, (doc) => {
    let base: FieldPath = [];
    if (name !== null) {
      const i = taskIndex(doc, name, scope);
      if (i < 0) return;
      base = [...scope, i];
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
export function renameTask(text: string, from: string, to: string, scope = TOP): string {
  return edit(text, (doc) => {
    const tasks = doc.getIn(scope);
    if (!isSeq(tasks)) return;
    const swap = (path: FieldPath) => {
      if (doc.getIn(path) === from) doc.setIn(path, to);
    };
    tasks.items.forEach((_, i) => {
      const task = [...scope, i];
      swap([...task, "name"]);
      for (const list of [["depends_on"], ["conditions", "success"], ["conditions", "failure"]]) {
        const seq = doc.getIn([...task, ...list]);
        if (isSeq(seq)) seq.items.forEach((_, j) => swap([...task, ...list, j]));
      }
      const cases = doc.getIn([...task, "switch", "cases"]);
      if (isSeq(cases)) cases.items.forEach((_, j) => swap([...task, "switch", "cases", j, "then"]));
      swap([...task, "switch", "default"]);
      swap([...task, "on_timeout"]);
      swap([...task, "on_error", "then"]);
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
