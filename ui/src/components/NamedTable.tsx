// A table of named objects (task groups, alert channels) under its heading, with the error
// of loading or changing them, and a Delete button per row for those who may delete; and
// the form that creates one.
import type { FormEvent, ReactNode } from "react";
import { errorText } from "./format";

export function NamedTable<T extends { name: string }>(props: {
  /** The heading and the table's accessible name, e.g. "Task groups". */
  title: string;
  /** One of them, for the Delete buttons' names, e.g. "task group". */
  noun: string;
  headers: string[];
  rows?: T[];
  /** The row's cells after its name. */
  cells: (row: T) => ReactNode;
  /** What went wrong loading or changing them: a message, or the error thrown. */
  error?: unknown;
  /** Shown when there are none. */
  empty: string;
  onDelete?: (row: T) => void;
  /** A change is being made: the Delete buttons wait. */
  busy?: boolean;
}) {
  const { title, noun, rows, onDelete, error } = props;
  return (
    <>
      <h2>{title}</h2>
      {error ? (
        <p role="alert" className="error">
          {errorText(error)}
        </p>
      ) : null}
      <table aria-label={title}>
        <thead>
          <tr>
            <th>Name</th>
            {props.headers.map((h) => (
              <th key={h}>{h}</th>
            ))}
            {onDelete && <th></th>}
          </tr>
        </thead>
        <tbody>
          {rows?.map((row) => (
            <tr key={row.name}>
              <td>{row.name}</td>
              {props.cells(row)}
              {onDelete && (
                <td className="right">
                  <button
                    type="button"
                    className="danger"
                    aria-label={`Delete ${noun} ${row.name}`}
                    disabled={props.busy}
                    onClick={() => onDelete(row)}
                  >
                    Delete
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {rows?.length === 0 && <p className="muted">{props.empty}</p>}
    </>
  );
}

/** "New <noun>": its name, then `children` (the other fields), and a Create button. */
export function NewNamedForm(props: {
  noun: string;
  name: string;
  setName: (name: string) => void;
  busy: boolean;
  onCreate: () => void;
  children: ReactNode;
}) {
  const title = `New ${props.noun}`;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    props.onCreate();
  };
  return (
    <form className="card" onSubmit={submit} aria-label={title}>
      <h2>{title}</h2>
      <div className="row">
        <label>
          Name
          <input value={props.name} onChange={(e) => props.setName(e.target.value)} required />
        </label>
        {props.children}
      </div>
      <div className="actions">
        <button type="submit" disabled={props.busy}>
          Create {props.noun}
        </button>
      </div>
    </form>
  );
}
