// Create, edit, switch and delete the workflow's cron schedule; the next 5 fire times in
// its zone are previewed (by the server's own cron math) as you type.
import { useEffect, useState, type FormEvent } from "react";
import { $api, invalidate } from "../api/cache";
import { ApiError, api } from "../api/client";
import { errorText } from "../components/format";
import { cleanRunOptions, RunOptionsFields, runOptionsOf, type RunOptions } from "../components/RunOptions";

const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

function FirePreview({ cron, timezone }: { cron: string; timezone: string }) {
  const [debounced, setDebounced] = useState({ cron, timezone });
  useEffect(() => {
    const t = setTimeout(() => setDebounced({ cron, timezone }), 250);
    return () => clearTimeout(t);
  }, [cron, timezone]);
  const { data, error } = $api.useQuery("get", "/api/v1/cron/preview", {
    params: { query: { ...debounced, count: 5 } },
  });
  return (
    <div className="preview">
      <h3 id="fires">Next fire times ({debounced.timezone})</h3>
      {error ? (
        <p role="alert" className="error">
          {errorText(error)}
        </p>
      ) : (
        <ol aria-label="Next fire times">
          {data?.fire_times.map((t) => (
            <li key={t}>{t}</li>
          ))}
        </ol>
      )}
    </div>
  );
}

export function SchedulePanel({ project, name }: { project: string; name: string }) {
  const where = { path: { project, name } };
  const { data: list } = $api.useQuery("get", "/api/v1/projects/{project}/workflows/{name}/schedules", {
    params: where,
  });
  /** The path of the stored schedule `id`. */
  const one = (id: number) => ({ params: { path: { project, name, id } } });
  const current = list?.[0];
  const [cron, setCron] = useState("0 0 2 * * *");
  const [timezone, setTimezone] = useState(browserZone);
  const [enabled, setEnabled] = useState(true);
  const [startTime, setStartTime] = useState("");
  const [endTime, setEndTime] = useState("");
  const [options, setOptions] = useState<RunOptions>({});
  const [error, setError] = useState("");
  const [status, setStatus] = useState("");

  // The stored schedule fills the form once it arrives (and again for another one).
  const [shown, setShown] = useState<number>();
  if (current && current.id !== shown) {
    setShown(current.id);
    setCron(current.cron);
    setTimezone(current.timezone);
    setEnabled(current.enabled);
    setStartTime(current.start_time ?? "");
    setEndTime(current.end_time ?? "");
    setOptions(runOptionsOf(current));
  }

  const act = async (what: string, run: () => Promise<unknown>) => {
    setError("");
    setStatus("");
    try {
      await run();
      setStatus(what);
      // The schedule shows here and with its workflow (on the workflows list too).
      invalidate("/api/v1/projects/{project}/workflows");
    } catch (e) {
      setError(e instanceof ApiError ? e.message : errorText(e));
    }
  };

  const submit = (e: FormEvent) => {
    e.preventDefault();
    // A save replaces the whole schedule: what the form does not show (set with the CLI
    // or the API) is sent back as stored.
    const kept = current ? { params: current.params, priority: current.priority, misfire: current.misfire } : {};
    const body = {
      ...kept,
      cron,
      timezone,
      enabled,
      start_time: startTime || null,
      end_time: endTime || null,
      ...cleanRunOptions(options),
    };
    if (current)
      act("Schedule saved", () =>
        api.PUT("/api/v1/projects/{project}/workflows/{name}/schedules/{id}", { ...one(current.id), body }),
      );
    else
      act("Schedule created", () =>
        api.POST("/api/v1/projects/{project}/workflows/{name}/schedules", { params: where, body }),
      );
  };

  return (
    <div className="split">
      <form className="card" onSubmit={submit}>
        <h2>{current ? "Schedule" : "New schedule"}</h2>
        <p className="muted">
          Cron with seconds: <code>sec min hour day month weekday</code>, e.g. <code>0 */15 * * * *</code>.
        </p>
        <label>
          Cron
          <input value={cron} onChange={(e) => setCron(e.target.value)} required spellCheck={false} />
        </label>
        <label>
          Timezone
          <input value={timezone} onChange={(e) => setTimezone(e.target.value)} required />
        </label>
        <div className="row">
          <label>
            Start time
            <input
              value={startTime}
              onChange={(e) => setStartTime(e.target.value)}
              placeholder="2026-01-01T00:00:00Z"
            />
          </label>
          <label>
            End time
            <input value={endTime} onChange={(e) => setEndTime(e.target.value)} placeholder="optional" />
          </label>
        </div>
        <RunOptionsFields project={project} legend="Its runs" value={options} onChange={setOptions} />
        <label className="check">
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} /> Enabled
        </label>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        {status && <p role="status">{status}</p>}
        <div className="actions">
          {current && (
            <>
              <button
                type="button"
                className="secondary"
                onClick={() =>
                  current.enabled
                    ? act("Schedule disabled", () =>
                        api.POST("/api/v1/projects/{project}/workflows/{name}/schedules/{id}/disable", one(current.id)),
                      )
                    : act("Schedule enabled", () =>
                        api.POST("/api/v1/projects/{project}/workflows/{name}/schedules/{id}/enable", one(current.id)),
                      )
                }
              >
                {current.enabled ? "Disable" : "Enable"}
              </button>
              <button
                type="button"
                className="danger"
                onClick={() =>
                  act("Schedule deleted", () =>
                    api.DELETE("/api/v1/projects/{project}/workflows/{name}/schedules/{id}", one(current.id)),
                  )
                }
              >
                Delete schedule
              </button>
            </>
          )}
          <button type="submit">{current ? "Save schedule" : "Create schedule"}</button>
        </div>
      </form>
      <div className="card">
        <FirePreview cron={cron} timezone={timezone} />
        {current && (
          <p className="muted">
            Stored: <code>{current.cron}</code> in {current.timezone},{" "}
            {current.enabled ? `next fire ${current.next_fire ?? "none"}` : "disabled"}.
          </p>
        )}
      </div>
    </div>
  );
}
