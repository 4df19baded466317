// One attempt's log, read in pieces with ?offset= and tailed every second while the
// attempt runs; searchable and downloadable.
import { useEffect, useMemo, useRef, useState } from "react";
import { ApiError, api } from "../api/client";
import type { TaskInstance } from "../api/types";
import { ExternalOffer } from "./ExternalOffer";
import { errorText } from "./format";

const ACTIVE = new Set(["submitted", "dispatched", "running", "delayed", "waiting_task_group"]);

/** The log of `task`'s attempt; render it with `key={task.id}`, so another attempt starts afresh. */
export function TaskLog({ task }: { task: TaskInstance }) {
  const [text, setText] = useState("");
  const [note, setNote] = useState("");
  const [search, setSearch] = useState("");
  const offset = useRef(0);
  // An external task's worker appends to its log while the task waits.
  const running = ACTIVE.has(task.state) || (task.state === "waiting" && task.type === "external");
  const pre = useRef<HTMLPreElement>(null);

  const started = !!task.worker;
  useEffect(() => {
    // No worker yet: there is no log to ask for (the page polls and re-renders when one is).
    if (!started) return;
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    // Read imperatively, not through the query cache: each read asks from the offset the
    // last one reached and appends, state a cached answer per key cannot hold.
    const read = async () => {
      try {
        for (;;) {
          const { data, response: res } = await api.GET("/api/v1/task-instances/{id}/log", {
            params: { path: { id: task.id }, query: { offset: offset.current } },
            parseAs: "text",
            signal: ctl.signal,
          });
          const chunk = data ?? "";
          if (ctl.signal.aborted) return;
          offset.current = Number(res.headers.get("x-shoal-log-next-offset") ?? offset.current + chunk.length);
          if (chunk) setText((t) => t + chunk);
          setNote("");
          if (res.headers.get("x-shoal-log-more") !== "true") break;
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
        setNote(e instanceof ApiError && e.status === 404 ? errorText(e) : `Could not read the log: ${errorText(e)}`);
      }
      if (running && !ctl.signal.aborted) timer = setTimeout(read, 1000);
    };
    read();
    return () => {
      ctl.abort();
      if (timer) clearTimeout(timer);
    };
  }, [task.id, running, started]);

  // Follow the tail while the attempt runs, unless the reader scrolled up.
  useEffect(() => {
    const el = pre.current;
    if (el && running && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [text, running]);

  const lines = useMemo(() => {
    const all = text.split("\n");
    if (!search) return all;
    const needle = search.toLowerCase();
    return all.filter((l) => l.toLowerCase().includes(needle));
  }, [text, search]);

  const download = useMemo(() => URL.createObjectURL(new Blob([text], { type: "text/plain" })), [text]);
  useEffect(() => () => URL.revokeObjectURL(download), [download]);

  return (
    <section className="card tasklog" aria-label={`Task log of ${task.name}`}>
      <div className="row">
        <h2>
          Log of {task.name} <span className="muted">attempt {task.attempt}</span>
        </h2>
        <span className="spacer" />
        <label className="inline">
          Search log
          <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
        </label>
        <a className="button secondary" href={download} download={`${task.name}-${task.id}-attempt${task.attempt}.log`}>
          Download log
        </a>
      </div>
      <ExternalOffer task={task} />
      {!started && <p className="muted">The attempt has not started on a worker yet ({task.state}).</p>}
      {note && <p className="muted">{note}</p>}
      {search && (
        <p className="muted" aria-live="polite">
          {lines.length} matching lines
        </p>
      )}
      <pre
        ref={pre}
        role="log"
        aria-label={`Log of ${task.name}`}
        aria-live={running ? "polite" : "off"}
        className="log"
      >
        {lines.join("\n")}
      </pre>
    </section>
  );
}
