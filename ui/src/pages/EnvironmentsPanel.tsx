// A project's environments: shell lines a worker runs in the same bash before a shell or
// python task that names one (`environment: NAME` on the task or workflow, or a run's
// start). Everyone who sees the project reads them; editors set, change and delete them.
import { useState, type FormEvent } from "react";
import { $api, invalidate } from "../api/cache";
import { api } from "../api/client";
import { atLeast } from "../api/session";
import type { Role } from "../api/types";
import { errorText, when } from "../components/format";

export function EnvironmentsPanel({ project, role }: { project: string; role: Role | null | undefined }) {
  const envs = $api.useQuery("get", "/api/v1/projects/{project}/environments", {
    params: { path: { project } },
  });
  const [error, setError] = useState("");
  const [name, setName] = useState("");
  const [config, setConfig] = useState("");
  const [description, setDescription] = useState("");
  const editor = atLeast(role, "editor");
  const at = (name: string) => ({ params: { path: { project, name } } });
  const act = async (what: () => Promise<unknown>) => {
    setError("");
    try {
      await what();
      // Also offered by the run forms (start, schedule, backfill).
      await invalidate("/api/v1/projects/{project}/environments");
      return true;
    } catch (e) {
      setError(errorText(e));
      return false;
    }
  };
  const save = async (e: FormEvent) => {
    e.preventDefault();
    const body = { config, description };
    const done = await act(() => api.PUT("/api/v1/projects/{project}/environments/{name}", { ...at(name), body }));
    if (done) {
      setName("");
      setConfig("");
      setDescription("");
    }
  };

  return (
    <section aria-label="Environments">
      <h2>Environments</h2>
      <p className="muted">
        Shell lines run before a shell or python task, in the same bash (<code>export JAVA_HOME=…</code>,{" "}
        <code>source /opt/venv/bin/activate</code>). A task or workflow names one as <code>environment: NAME</code>; a
        run's start may name one over both.
      </p>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      <table aria-label="Environments">
        <thead>
          <tr>
            <th>Name</th>
            <th>Shell lines</th>
            <th>Description</th>
            <th>Updated</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {envs.data?.map((env) => (
            <tr key={env.name}>
              <td>
                <code>{env.name}</code>
              </td>
              <td>
                <pre className="environment-config">{env.config}</pre>
              </td>
              <td>{env.description}</td>
              <td>
                {when(env.updated_at)} by {env.updated_by}
              </td>
              <td className="right">
                {editor && (
                  <>
                    <button
                      type="button"
                      onClick={() => {
                        setName(env.name);
                        setConfig(env.config);
                        setDescription(env.description);
                      }}
                    >
                      Edit
                    </button>{" "}
                    <button
                      type="button"
                      onClick={() =>
                        act(() => api.DELETE("/api/v1/projects/{project}/environments/{name}", at(env.name)))
                      }
                    >
                      Delete
                    </button>
                  </>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {envs.error && (
        <p role="alert" className="error">
          {errorText(envs.error)}
        </p>
      )}
      {envs.data?.length === 0 && <p className="muted">No environments.</p>}
      {editor && (
        <form className="card environment-form" onSubmit={save} aria-label="Set environment">
          <div className="row">
            <label>
              Name
              <input value={name} onChange={(e) => setName(e.target.value)} required />
            </label>
            <label>
              Description
              <input value={description} onChange={(e) => setDescription(e.target.value)} />
            </label>
          </div>
          <label>
            Shell lines
            <textarea
              rows={5}
              value={config}
              onChange={(e) => setConfig(e.target.value)}
              required
              spellCheck={false}
              placeholder={"export JAVA_HOME=/opt/jdk17\nsource /opt/venv/bin/activate"}
            />
          </label>
          <div className="row-button">
            <button type="submit">Set environment</button>
          </div>
        </form>
      )}
    </section>
  );
}
