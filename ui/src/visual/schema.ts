// The definition's JSON Schema as the server serves it (GET /api/v1/schema/workflow), and
// what the task form needs to know of it: which widget a field takes.

export interface JsonSchema {
  type?: string | string[];
  enum?: string[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  required?: string[];
  oneOf?: JsonSchema[];
  $ref?: string;
  description?: string;
  example?: unknown;
}

export interface WorkflowSchema extends JsonSchema {
  $defs: Record<string, JsonSchema>;
  /** Task type → the task fields it has of its own. */
  "x-task-fields": Record<string, string[]>;
}

/** The widget of a field. */
export type Widget =
  | { kind: "text"; multiline: boolean }
  | { kind: "number" }
  | { kind: "check" }
  | { kind: "choice"; options: string[] }
  | { kind: "map" }
  | { kind: "list" }
  | { kind: "section"; schema: JsonSchema }
  /** Anything else (lists of objects, unions, free-form objects): a YAML fragment. */
  | { kind: "yaml" };

/** Texts people write over several lines. */
const MULTILINE = new Set(["command", "script", "query", "body"]);

/** `schema` with its reference followed and an optional (`oneOf [X, null]`) unwrapped. */
export function resolve(root: WorkflowSchema, schema: JsonSchema): JsonSchema {
  let s = schema;
  for (let i = 0; i < 4; i++) {
    if (s.$ref) s = { ...root.$defs[s.$ref.replace("#/$defs/", "")], description: s.description ?? undefined };
    else if (s.oneOf) {
      const some = s.oneOf.filter((o) => o.type !== "null");
      if (some.length !== 1) return s;
      s = { ...some[0], description: some[0].description ?? s.description };
    } else return s;
  }
  return s;
}

function types(s: JsonSchema): string[] {
  return (Array.isArray(s.type) ? s.type : s.type ? [s.type] : []).filter((t) => t !== "null");
}

/** The widget for field `key` of schema `schema`; `nested`: inside a section already. */
export function widget(root: WorkflowSchema, key: string, schema: JsonSchema, nested: boolean): Widget {
  const s = resolve(root, schema);
  if (s.oneOf) return { kind: "yaml" };
  const [t] = types(s);
  if (s.enum) return { kind: "choice", options: s.enum };
  if (t === "string") return { kind: "text", multiline: MULTILINE.has(key) };
  if (t === "integer" || t === "number") return { kind: "number" };
  if (t === "boolean") return { kind: "check" };
  if (t === "array") return types(resolve(root, s.items ?? {}))[0] === "string" ? { kind: "list" } : { kind: "yaml" };
  if (t === "object") {
    const values = typeof s.additionalProperties === "object" ? resolve(root, s.additionalProperties) : null;
    if (!s.properties && values && types(values)[0] === "string") return { kind: "map" };
    // A section two deep (a foreach's task template) is edited as YAML, not as a form
    // that could nest without end.
    if (s.properties && !nested) return { kind: "section", schema: s };
  }
  return { kind: "yaml" };
}
