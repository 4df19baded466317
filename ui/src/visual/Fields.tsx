// Form fields generated from the definition's JSON Schema. A field commits when it loses
// focus or on Enter (one undo step per change, not per keystroke); an empty field is left
// out of the definition so its default applies.
import { useState, type KeyboardEvent } from "react";
import { fragment, parseFragment, type FieldPath } from "./definition";
import { widget, type JsonSchema, type WorkflowSchema } from "./schema";

export type SetField = (path: FieldPath, value: unknown) => void;

/** Commits an input on Enter (but a textarea's Enter is a new line; Ctrl+Enter commits). */
function enterCommits(e: KeyboardEvent<HTMLInputElement | HTMLTextAreaElement>) {
  if (e.key === "Enter" && (e.currentTarget.tagName === "INPUT" || e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    e.currentTarget.blur();
  }
}

const text = (v: unknown) => (v === undefined || v === null ? "" : String(v));

/** The fields `keys` of an object of schema `schema`, holding `value`. */
export function Fields({
  root,
  schema,
  keys,
  value,
  path,
  set,
  nested = false,
}: {
  root: WorkflowSchema;
  schema: JsonSchema;
  keys: string[];
  value: Record<string, unknown>;
  path: FieldPath;
  set: SetField;
  nested?: boolean;
}) {
  return (
    <>
      {keys.map((k) => (
        <Field
          key={k}
          root={root}
          name={k}
          schema={schema.properties?.[k] ?? {}}
          value={value[k]}
          path={[...path, k]}
          set={set}
          nested={nested}
        />
      ))}
    </>
  );
}

function Field({
  root,
  name,
  schema,
  value,
  path,
  set,
  nested,
}: {
  root: WorkflowSchema;
  name: string;
  schema: JsonSchema;
  value: unknown;
  path: FieldPath;
  set: SetField;
  nested: boolean;
}) {
  const w = widget(root, name, schema, nested);
  const hint = schema.description;
  // Inside a section the key alone is ambiguous (`retries`, `on_error.retries`).
  const aria = nested ? path.filter((p) => typeof p === "string").join(".") : undefined;
  // The field's path as the control's name (`on_error.retries`), as a form would post it.
  const id = path.join(".");
  const commit = (v: unknown) => {
    if (JSON.stringify(v ?? "") !== JSON.stringify(value ?? "")) set(path, v);
  };
  switch (w.kind) {
    case "text":
      return (
        <label title={hint}>
          {name}
          {w.multiline ? (
            <textarea
              aria-label={aria}
              name={id}
              key={text(value)}
              defaultValue={text(value)}
              rows={3}
              onBlur={(e) => commit(e.target.value)}
              onKeyDown={enterCommits}
            />
          ) : (
            <input
              aria-label={aria}
              name={id}
              key={text(value)}
              defaultValue={text(value)}
              onBlur={(e) => commit(e.target.value)}
              onKeyDown={enterCommits}
            />
          )}
        </label>
      );
    case "number":
      return (
        <label title={hint}>
          {name}
          <input
            aria-label={aria}
            name={id}
            type="number"
            key={text(value)}
            defaultValue={text(value)}
            onBlur={(e) => commit(e.target.value === "" ? undefined : Number(e.target.value))}
            onKeyDown={enterCommits}
          />
        </label>
      );
    case "check":
      return (
        <label className="check" title={hint}>
          {/* Unset is the definition's default; only `enabled` defaults to true. */}
          <input
            aria-label={aria}
            name={id}
            type="checkbox"
            checked={value === undefined ? name === "enabled" : value === true}
            onChange={(e) => set(path, e.target.checked === (name === "enabled") ? undefined : e.target.checked)}
          />
          {name}
        </label>
      );
    case "choice":
      return (
        <label title={hint}>
          {name}
          <select
            aria-label={aria}
            name={id}
            value={text(value)}
            onChange={(e) => set(path, e.target.value || undefined)}
          >
            <option value="">(default)</option>
            {w.options.map((o) => (
              <option key={o}>{o}</option>
            ))}
          </select>
        </label>
      );
    case "list":
      return (
        <label title={hint}>
          {name} (one a line)
          <textarea
            aria-label={aria}
            name={id}
            key={text(value)}
            rows={2}
            defaultValue={Array.isArray(value) ? value.join("\n") : text(value)}
            onBlur={(e) =>
              commit(
                e.target.value
                  .split("\n")
                  .map((l) => l.trim())
                  .filter(Boolean),
              )
            }
            onKeyDown={enterCommits}
          />
        </label>
      );
    case "map":
      return <MapField name={aria ?? name} hint={hint} value={value} path={path} set={set} />;
    case "section":
      return (
        <fieldset title={hint}>
          <legend>{name}</legend>
          <Fields
            root={root}
            schema={w.schema}
            keys={Object.keys(w.schema.properties ?? {})}
            value={(value ?? {}) as Record<string, unknown>}
            path={path}
            set={set}
            nested
          />
        </fieldset>
      );
    case "yaml":
      return <YamlField name={aria ?? name} hint={hint} value={value} path={path} set={set} />;
  }
}

/** A map of strings (params, headers, env): one `key: value` row each. */
function MapField({
  name,
  hint,
  value,
  path,
  set,
}: {
  name: string;
  hint?: string;
  value: unknown;
  path: FieldPath;
  set: SetField;
}) {
  const map = (value ?? {}) as Record<string, unknown>;
  const entries = Object.entries(map);
  const [adding, setAdding] = useState("");
  // The whole map is set each time, so an entry may hold an empty string (`order: ""`).
  const without = (key: string) => Object.fromEntries(entries.filter(([k]) => k !== key));
  return (
    <fieldset title={hint}>
      <legend>{name}</legend>
      {entries.map(([k, v]) => (
        <div className="row kv" key={k}>
          <label className="inline">
            {k}
            <input
              key={text(v)}
              aria-label={`${name} ${k}`}
              defaultValue={text(v)}
              onBlur={(e) => e.target.value !== text(v) && set(path, { ...map, [k]: e.target.value })}
              onKeyDown={enterCommits}
            />
          </label>
          <button type="button" className="small secondary" onClick={() => set(path, without(k))}>
            Remove {k}
          </button>
        </div>
      ))}
      <div className="row kv">
        <input
          aria-label={`New ${name} name`}
          placeholder="name"
          value={adding}
          onChange={(e) => setAdding(e.target.value)}
        />
        <button
          type="button"
          className="small secondary"
          disabled={!adding.trim() || adding.trim() in map}
          onClick={() => {
            set(path, { ...map, [adding.trim()]: "" });
            setAdding("");
          }}
        >
          Add {name}
        </button>
      </div>
    </fieldset>
  );
}

/** A field without a widget of its own, as a YAML fragment. */
function YamlField({
  name,
  hint,
  value,
  path,
  set,
}: {
  name: string;
  hint?: string;
  value: unknown;
  path: FieldPath;
  set: SetField;
}) {
  const [bad, setBad] = useState("");
  const shown = fragment(value);
  return (
    <label title={hint}>
      {name} (YAML)
      <textarea
        key={shown}
        className="code"
        rows={Math.min(Math.max(shown.split("\n").length, 2), 12)}
        defaultValue={shown}
        aria-invalid={!!bad}
        onBlur={(e) => {
          if (e.target.value.trim() === shown) return;
          try {
            set(path, parseFragment(e.target.value));
            setBad("");
          } catch (err) {
            setBad(err instanceof Error ? err.message : String(err));
          }
        }}
        onKeyDown={enterCommits}
      />
      {bad && <span className="error">{bad}</span>}
    </label>
  );
}
