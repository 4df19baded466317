// Backfill a range of days (or a list of dates) and follow each backfill's progress.
import { useState, type FormEvent } from "react";
import { $api, every, invalidate } from "../api/cache";
import { answer, api } from "../api/client";
import type { Backfill, BackfillCreated, BackfillRequest } from "../api/types";
import { cleanRunOptions, RunOptionsFields, type RunOptions } from "../components/RunOptions";
import { StateBadge } from "../components/StateBadge";
import { errorText, when } from "../components/format";
import { Link, path } from "../router";

const today = () => new Date().toISOString().slice(0, 10);

function Progress({ b }: { b: Backfill }) {
  return (
    <li className="card">
      <div className="row">
        <b>Backfill {b.id}</b> <StateBadge state={b.state} />
        <span className="muted">{when(b.created_at as string)}</span>
        {b.follows != null && (
          <span className="muted">
            stage {b.stage} after backfill {b.follows}
          </span>
        )}
        <span className="spacer" />
        {b.state === "running" && (
          <button
            className="secondary"
            onClick={() =>
              api
                .POST("/api/v1/backfills/{id}/cancel", { params: { path: { id: b.id } } })
                .then(() => invalidate("/api/v1/backfills", "/api/v1/instances"))
                .catch(() => undefined)
            }
          >
            Cancel backfill {b.id}
          </button>
        )}
      </div>
      <progress
        max={b.total}
        value={b.done}
        aria-label={`Backfill ${b.id} progress`}
        aria-valuetext={`${b.done} of ${b.total} dates done`}
      />
      <p>
        {b.done} of {b.total} dates done, {b.succeeded} succeeded
        {b.failed.length > 0 && <>, failed: {b.failed.join(", ")}</>}
      </p>
      <details>
        <summary>Runs</summary>
        <ul>
          {b.runs?.map((r) => (
            <li key={r.schedule_time}>
              {r.schedule_time} <StateBadge state={r.state} />{" "}
              {r.workflow_instance_id && (
                <Link href={path.instance(r.workflow_instance_id)}>#{r.workflow_instance_id}</Link>
              )}{" "}
              {r.error}
            </li>
          ))}
        </ul>
      </details>
    </li>
  );
}

export function BackfillPanel({ project, name }: { project: string; name: string }) {
  const [from, setFrom] = useState(today());
  const [to, setTo] = useState(today());
  const [dates, setDates] = useState("");
  const [parallel, setParallel] = useState(1);
  const [order, setOrder] = useState<BackfillRequest["order"]>("asc");
  const [stopOnFailure, setStopOnFailure] = useState(false);
  const [withDependents, setWithDependents] = useState(false);
  const [options, setOptions] = useState<RunOptions>({});
  const [created, setCreated] = useState<BackfillCreated | null>(null);
  const [error, setError] = useState("");
  const query = { project, workflow: name, limit: 20 };
  const { data } = $api.useQuery("get", "/api/v1/backfills", { params: { query } }, every(1000));

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError("");
    const list = dates.split(/[\s,]+/).filter(Boolean);
    const common = {
      parallel,
      order,
      stop_on_failure: stopOnFailure,
      with_dependents: withDependents,
      ...cleanRunOptions(options),
    };
    const body: BackfillRequest = list.length ? { dates: list, ...common } : { from, to, ...common };
    try {
      const backfill = api.POST("/api/v1/projects/{project}/workflows/{name}/backfill", {
        params: { path: { project, name } },
        body,
      });
      setCreated(await answer(backfill));
      // Its runs show on the instances pages too.
      invalidate("/api/v1/backfills", "/api/v1/instances");
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <div className="split">
      <form className="card" onSubmit={submit}>
        <h2>New backfill</h2>
        <p className="muted">
          One run per fire time of the schedule on each day (one per day at 00:00 without a schedule).
        </p>
        <div className="row">
          <label>
            From
            <input type="date" value={from} onChange={(e) => setFrom(e.target.value)} disabled={!!dates.trim()} />
          </label>
          <label>
            To
            <input type="date" value={to} onChange={(e) => setTo(e.target.value)} disabled={!!dates.trim()} />
          </label>
        </div>
        <label>
          Dates (instead of a range)
          <input value={dates} onChange={(e) => setDates(e.target.value)} placeholder="2026-01-03, 2026-01-07" />
        </label>
        <div className="row">
          <label>
            Parallel
            <input type="number" min={1} value={parallel} onChange={(e) => setParallel(Number(e.target.value))} />
          </label>
          <label>
            Order
            <select value={order} onChange={(e) => setOrder(e.target.value as BackfillRequest["order"])}>
              <option value="asc">oldest first</option>
              <option value="desc">newest first</option>
            </select>
          </label>
        </div>
        <label className="check">
          <input type="checkbox" checked={stopOnFailure} onChange={(e) => setStopOnFailure(e.target.checked)} /> Stop on
          failure
        </label>
        <label className="check">
          <input type="checkbox" checked={withDependents} onChange={(e) => setWithDependents(e.target.checked)} /> With
          dependents
          <span className="muted">
            {" "}
            (also the workflows whose dependent tasks wait for this one, each stage after the one before)
          </span>
        </label>
        <RunOptionsFields project={project} legend="Its runs" value={options} onChange={setOptions} />
        {created && (created.dependents.length > 0 || created.left_out.length > 0) && (
          <div className="message-box" aria-label="Dependent backfills">
            {created.dependents.map((d) => (
              <p key={d.id}>
                Backfill {d.id}: {d.runs} runs of{" "}
                <Link href={path.workflow(d.project, d.workflow)}>
                  {d.project}/{d.workflow}
                </Link>
                , stage {d.stage}
              </p>
            ))}
            {created.left_out.map((why) => (
              <p key={why}>Not backfilled: {why}</p>
            ))}
          </div>
        )}
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        <div className="actions">
          <button type="submit">Start backfill</button>
        </div>
      </form>
      <div>
        <h2>Backfills</h2>
        {data?.length === 0 && <p className="muted">None yet.</p>}
        <ul className="plain" aria-label="Backfills">
          {data?.map((b) => (
            <Progress key={b.id} b={b} />
          ))}
        </ul>
      </div>
    </div>
  );
}
