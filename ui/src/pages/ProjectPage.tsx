// A project's settings: its members and their roles, its secrets (names only), its
// environments, and deleting it. What the caller may change follows their role in it.
import { useState, type FormEvent } from "react";
import { $api, invalidate, queryClient } from "../api/cache";
import { api } from "../api/client";
import { atLeast } from "../api/session";
import type { Role } from "../api/types";
import { errorText, when } from "../components/format";
import { Link, navigate, path, useTitle } from "../router";
import { EnvironmentsPanel } from "./EnvironmentsPanel";

const ROLES: Role[] = ["worker", "viewer", "operator", "editor", "admin"];

function Alert({ text }: { text: string }) {
  return text ? (
    <p role="alert" className="error">
      {text}
    </p>
  ) : null;
}

export function ProjectPage({ project }: { project: string }) {
  useTitle(`${project} · settings`);
  const where = { path: { project } };
  const detail = $api.useQuery("get", "/api/v1/projects/{project}", { params: where });
  const secrets = $api.useQuery("get", "/api/v1/projects/{project}/secrets", { params: where });
  const [error, setError] = useState("");
  const role = detail.data?.role;
  /** Runs a write, then refreshes the cached reads it changed. */
  const act = async (what: () => Promise<unknown>, changed: () => void) => {
    setError("");
    try {
      await what();
      changed();
    } catch (e) {
      setError(errorText(e));
    }
  };
  // Members show here and (the caller's role) on the list of projects; not every read
  // under the project, which a member removing themselves may no longer make.
  const membersChanged = () =>
    ["/api/v1/projects", "/api/v1/projects/{project}"].forEach((p) =>
      queryClient.invalidateQueries({ queryKey: ["get", p], refetchType: "all" }),
    );
  const secretsChanged = () => invalidate("/api/v1/projects/{project}/secrets");
  const member = (user: string) => ({ params: { path: { project, user } } });
  const setRole = (user: string, role: Role) =>
    api.PUT("/api/v1/projects/{project}/members/{user}", { ...member(user), body: { role } });
  const secret = (name: string) => ({ params: { path: { project, name } } });

  const [newUser, setNewUser] = useState("");
  const [newRole, setNewRole] = useState<Role>("viewer");
  const addMember = (e: FormEvent) => {
    e.preventDefault();
    act(() => setRole(newUser, newRole), membersChanged).then(() => setNewUser(""));
  };
  const [secretName, setSecretName] = useState("");
  const [secretValue, setSecretValue] = useState("");
  const [secretDescription, setSecretDescription] = useState("");
  const setSecret = (e: FormEvent) => {
    e.preventDefault();
    const body = { value: secretValue, description: secretDescription };
    act(
      () => api.PUT("/api/v1/projects/{project}/secrets/{name}", { ...secret(secretName), body }),
      secretsChanged,
    ).then(() => {
      setSecretName("");
      setSecretValue("");
      setSecretDescription("");
    });
  };
  const remove = async () => {
    setError("");
    try {
      await api.DELETE("/api/v1/projects/{project}", { params: where });
      navigate("/projects");
      // The list of projects only (queries under a deleted project would answer 404).
      queryClient.invalidateQueries({ queryKey: ["get", "/api/v1/projects"], refetchType: "all" });
    } catch (e) {
      setError(errorText(e));
    }
  };

  if (detail.error) {
    return (
      <>
        <h1>{project}</h1>
        <Alert text={errorText(detail.error)} />
      </>
    );
  }
  const d = detail.data;
  return (
    <>
      <div className="pagehead">
        <p className="crumbs">
          <Link href="/projects">Projects</Link> /
        </p>
        <h1>{project}</h1>
        <Link href={path.workflows(project)}>Workflows</Link>
        <span className="spacer" />
        {atLeast(role, "admin") && (
          <button
            type="button"
            className="danger"
            onClick={remove}
            disabled={!!d && d.workflows > 0}
            title={d && d.workflows > 0 ? "Only an empty project can be deleted" : undefined}
          >
            Delete project
          </button>
        )}
      </div>
      {d && (
        <p className="muted">
          {d.description ? `${d.description}. ` : ""}
          {d.workflows} workflow(s). Created {when(d.created_at)}
          {d.created_by ? ` by ${d.created_by}` : ""}. Your role: <strong>{role ?? "none"}</strong>.
        </p>
      )}
      <Alert text={error} />
      <div className="split">
        <div>
          <h2>Members</h2>
          <table aria-label="Members">
            <thead>
              <tr>
                <th>User</th>
                <th>Role</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {d?.members.map((m) => (
                <tr key={m.user}>
                  <td>{m.user}</td>
                  <td>
                    {atLeast(role, "admin") ? (
                      <select
                        aria-label={`Role of ${m.user}`}
                        value={m.role}
                        onChange={(e) => act(() => setRole(m.user, e.target.value as Role), membersChanged)}
                      >
                        {ROLES.map((r) => (
                          <option key={r}>{r}</option>
                        ))}
                      </select>
                    ) : (
                      m.role
                    )}
                  </td>
                  <td className="right">
                    {atLeast(role, "admin") && (
                      <button
                        type="button"
                        onClick={() =>
                          act(
                            () => api.DELETE("/api/v1/projects/{project}/members/{user}", member(m.user)),
                            membersChanged,
                          )
                        }
                      >
                        Remove
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {atLeast(role, "admin") && (
            <form className="card" onSubmit={addMember} aria-label="Add member">
              <div className="row">
                <label>
                  User
                  <input value={newUser} onChange={(e) => setNewUser(e.target.value)} required />
                </label>
                <label>
                  Role
                  <select value={newRole} onChange={(e) => setNewRole(e.target.value as Role)}>
                    {ROLES.map((r) => (
                      <option key={r}>{r}</option>
                    ))}
                  </select>
                </label>
                <div className="row-button">
                  <button type="submit">Add member</button>
                </div>
              </div>
            </form>
          )}
        </div>
        <div>
          <h2>Secrets</h2>
          <p className="muted">
            Tasks use a secret as <code>{"${secret.NAME}"}</code>, or as a sql task's datasource. Values are never
            shown.
          </p>
          <table aria-label="Secrets">
            <thead>
              <tr>
                <th>Name</th>
                <th>Description</th>
                <th>Updated</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {secrets.data?.map((s) => (
                <tr key={s.name}>
                  <td>
                    <code>{s.name}</code>
                  </td>
                  <td>{s.description}</td>
                  <td>
                    {when(s.updated_at)} by {s.updated_by}
                  </td>
                  <td className="right">
                    {atLeast(role, "editor") && (
                      <button
                        type="button"
                        onClick={() =>
                          act(
                            () => api.DELETE("/api/v1/projects/{project}/secrets/{name}", secret(s.name)),
                            secretsChanged,
                          )
                        }
                      >
                        Delete
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {secrets.data?.length === 0 && <p className="muted">No secrets.</p>}
          {atLeast(role, "editor") && (
            <form className="card" onSubmit={setSecret} aria-label="Set secret">
              <div className="row">
                <label>
                  Name
                  <input value={secretName} onChange={(e) => setSecretName(e.target.value)} required />
                </label>
                <label>
                  Value
                  <input
                    type="password"
                    value={secretValue}
                    onChange={(e) => setSecretValue(e.target.value)}
                    required
                    autoComplete="off"
                  />
                </label>
                <label>
                  Description
                  <input value={secretDescription} onChange={(e) => setSecretDescription(e.target.value)} />
                </label>
                <div className="row-button">
                  <button type="submit">Set secret</button>
                </div>
              </div>
            </form>
          )}
        </div>
      </div>
      <EnvironmentsPanel project={project} role={role} />
    </>
  );
}
