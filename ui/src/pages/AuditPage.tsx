// The audit log (global admins): every change made through the API, newest first.
import { useState } from "react";
import { $api, every } from "../api/cache";
import { errorText, when } from "../components/format";
import { useQueryState, useTitle } from "../router";

const PAGE = 100;

export function AuditPage() {
  useTitle("Audit log");
  const [query, setQuery] = useQueryState();
  const filters = {
    actor: query.get("actor") ?? "",
    project: query.get("project") ?? "",
    action: query.get("action") ?? "",
  };
  const before = query.get("before") ?? "";
  const page = { ...filters, before: Number(before) || undefined, limit: PAGE };
  const rows = $api.useQuery("get", "/api/v1/audit", { params: { query: page } }, every(5000));
  const [draft, setDraft] = useState(filters);
  const apply = () => setQuery({ ...draft });
  const last = rows.data?.[rows.data.length - 1];
  return (
    <>
      <div className="pagehead">
        <h1>Audit log</h1>
      </div>
      <form
        className="filters"
        aria-label="Filters"
        onSubmit={(e) => {
          e.preventDefault();
          apply();
        }}
      >
        {(["actor", "project", "action"] as const).map((f) => (
          <label key={f}>
            {f[0].toUpperCase() + f.slice(1)}
            <input
              value={draft[f]}
              onChange={(e) => setDraft({ ...draft, [f]: e.target.value })}
              placeholder={f === "action" ? "e.g. startWorkflow" : ""}
            />
          </label>
        ))}
        <div className="row-button">
          <button type="submit">Filter</button>
        </div>
      </form>
      {rows.error && (
        <p role="alert" className="error">
          {errorText(rows.error)}
        </p>
      )}
      <table aria-label="Audit log">
        <thead>
          <tr>
            <th>When</th>
            <th>Who</th>
            <th>Action</th>
            <th>Target</th>
            <th>Object</th>
            <th>Project</th>
            <th>From</th>
            <th>Result</th>
          </tr>
        </thead>
        <tbody>
          {rows.data?.map((r) => (
            <tr key={r.id}>
              <td>{when(r.at)}</td>
              <td>{r.actor}</td>
              <td>{r.action}</td>
              <td>
                <code>{r.target}</code>
              </td>
              <td>{r.object ?? "—"}</td>
              <td>{r.project ?? "—"}</td>
              <td>{r.address}</td>
              <td className={r.result === "ok" ? "" : "message"}>{r.result}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="pager">
        {before && (
          <button type="button" onClick={() => setQuery({ ...filters })}>
            Newest
          </button>
        )}
        <button
          type="button"
          disabled={!last || (rows.data?.length ?? 0) < PAGE}
          onClick={() => last && setQuery({ ...filters, before: String(last.id) })}
        >
          Older
        </button>
      </div>
    </>
  );
}
