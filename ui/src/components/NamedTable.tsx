// A table of named objects (task groups, alert channels) under its heading, with the error
// of loading or changing them, and a Delete button per row for those who may delete.
import type { ReactNode } from "react";
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
  error?: string | Error;
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
      {error && (
        <p role="alert" className="error">
          {typeof error === "string" ? error : errorText(error)}
        </p>
      )}
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
                  <button type="button" className="danger" aria-label={`Delete ${noun} ${row.name}`} disabled={props.busy} onClick={() => onDelete(row)}>
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
