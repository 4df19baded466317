// Write or edit a workflow as YAML or on a canvas (the visual editor, loaded when first
// shown). Both edit one text; every pause in typing asks the server to validate it (nothing
// is stored): its error is shown beside the editor and on the offending line or task, and
// the DAG preview follows. Apply stores a new version.
import { Suspense, lazy, useEffect, useState } from "react";
import { $api, invalidate } from "../api/cache";
import { ApiError, answer, api, yaml } from "../api/client";
import type { Validated } from "../api/types";
import { Dag } from "../components/Dag";
import { YamlEditor, type Problem } from "../components/YamlEditor";
import { errorText } from "../components/format";
import { Link, navigate, path, useQueryState, useTitle } from "../router";

const VisualEditor = lazy(() => import("../visual/VisualEditor"));

const TEMPLATE = `name: my_workflow
description: what this workflow does
params:
  greeting: hello
tasks:
  - name: extract
    type: shell
    command: echo "\${greeting} from extract"
  - name: load
    type: shell
    command: echo loading
    depends_on: [extract]
`;

/**
 * The task a problem is about and the line it is on: the server's line, else the line
 * naming the task it blames.
 */
function locate(text: string, e: ApiError): Problem {
  const body = e.body as { line?: number; task?: string };
  const task = body.task ?? /task '([^']+)'/.exec(e.message)?.[1];
  if (typeof body.line === "number") return { message: e.message, line: body.line, task };
  const m = /line (\d+)/.exec(e.message);
  if (m) return { message: e.message, line: Number(m[1]), task };
  if (task) {
    const esc = task.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const re = new RegExp(`name:\\s*["']?${esc}["']?\\s*(,|}|$)`);
    const idx = text.split("\n").findIndex((l) => re.test(l));
    if (idx >= 0) return { message: e.message, line: idx + 1, task };
  }
  return { message: e.message, task };
}

export default function EditorPage({ project, name }: { project: string; name?: string }) {
  useTitle(name ? `Edit ${name}` : "New workflow");
  const [seed, setSeed] = useState(name ? "" : TEMPLATE);
  const [text, setText] = useState(seed);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [preview, setPreview] = useState<Validated | null>(null);
  const [applying, setApplying] = useState(false);
  const [query, setQuery] = useQueryState();
  const visual = query.get("view") === "visual";
  // Once opened, the visual editor stays (hidden in the YAML view): its layout and undo
  // history survive a look at the YAML.
  const [opened, setOpened] = useState(visual);
  if (visual && !opened) setOpened(true);
  // While hidden it keeps the text it last showed: typing YAML does not re-parse a large
  // definition for a view no one sees.
  const [canvasText, setCanvasText] = useState(text);
  if (visual && canvasText !== text) setCanvasText(text);
  const show = (view: "yaml" | "visual") => {
    // The YAML editor is made again from the text the canvas left.
    if (view === "yaml") setSeed(text);
    setQuery(view === "visual" ? { view } : {});
  };

  // The stored workflow (shared with its page) seeds the editor once, as fetched now (not
  // a cached answer that may be older); a later refetch does not overwrite the typing.
  const stored = $api.useQuery(
    "get",
    "/api/v1/projects/{project}/workflows/{name}",
    { params: { path: { project, name: name ?? "" } } },
    { enabled: !!name },
  );
  const loadError = stored.error ? errorText(stored.error) : "";
  const [seeded, setSeeded] = useState(false);
  if (stored.data && stored.isFetchedAfterMount && !seeded) {
    setSeeded(true);
    setSeed(stored.data.yaml);
    setText(stored.data.yaml);
  }

  useEffect(() => {
    if (!text.trim()) return;
    const ctl = new AbortController();
    const t = setTimeout(async () => {
      try {
        const v = await answer(
          api.POST("/api/v1/projects/{project}/validate", {
            params: { path: { project } },
            ...yaml(text),
            signal: ctl.signal,
          }),
        );
        setPreview(v);
        setProblem(null);
      } catch (e) {
        if (ctl.signal.aborted) return;
        setProblem(e instanceof ApiError && e.status === 400 ? locate(text, e) : { message: errorText(e) });
      }
    }, 400);
    return () => {
      clearTimeout(t);
      ctl.abort();
    };
  }, [text, project]);

  const apply = async () => {
    setApplying(true);
    try {
      const res = await answer(
        api.POST("/api/v1/projects/{project}/workflows", { params: { path: { project } }, ...yaml(text) }),
      );
      // A new version (or workflow): its page and the workflows list show it.
      invalidate("/api/v1/projects/{project}/workflows");
      navigate(path.workflow(project, res.name));
    } catch (e) {
      setProblem(e instanceof ApiError && e.status === 400 ? locate(text, e) : { message: errorText(e) });
    } finally {
      setApplying(false);
    }
  };

  const status = problem ? (
    <p role="alert" className="error">
      {problem.line && !visual ? `Line ${problem.line}: ` : ""}
      {problem.message}
    </p>
  ) : (
    <p className="muted" role="status">
      {preview ? `Valid: ${preview.tasks.length} tasks. Apply stores a new version.` : "Checking…"}
    </p>
  );

  return (
    <>
      <p className="crumbs">
        <Link href={path.workflows(project)}>{project}</Link> /{" "}
        {name && (
          <>
            <Link href={path.workflow(project, name)}>{name}</Link> /
          </>
        )}
      </p>
      <div className="pagehead">
        <h1>{name ? `Edit ${name}` : "New workflow"}</h1>
        <span className="spacer" />
        <button onClick={apply} disabled={applying || !text.trim()}>
          Apply
        </button>
      </div>
      {loadError && (
        <p role="alert" className="error">
          {loadError}
        </p>
      )}
      <div className="tabs" role="group" aria-label="View">
        <button type="button" aria-pressed={!visual} onClick={() => show("yaml")}>
          YAML
        </button>
        <button type="button" aria-pressed={visual} onClick={() => show("visual")}>
          Visual
        </button>
      </div>
      {visual && name && !seeded && <p className="muted">Loading…</p>}
      {opened && (!name || seeded) && (
        <div hidden={!visual}>
          <Suspense fallback={<p className="muted">Loading the visual editor…</p>}>
            <VisualEditor project={project} text={canvasText} onChange={setText} problem={problem} />
          </Suspense>
        </div>
      )}
      {visual && status}
      {!visual && (
        <div className="split">
          <div>
            <YamlEditor value={seed} onChange={setText} problem={problem} />
            {status}
          </div>
          {preview ? (
            <Dag tasks={preview.tasks} label="DAG preview" />
          ) : (
            <section aria-label="DAG preview" className="dag">
              <p className="muted dag-empty">{problem ? "The DAG is drawn once the YAML is valid." : "Checking…"}</p>
            </section>
          )}
        </div>
      )}
    </>
  );
}
