// The projects the caller may see, and a form to create one (its creator becomes its admin).
import { useState, type FormEvent } from "react";
import { $api, invalidate } from "../api/cache";
import { api } from "../api/client";
import { errorText } from "../components/format";
import { Link, navigate, path, useTitle } from "../router";

export function ProjectsPage() {
  useTitle("Projects");
  const projects = $api.useQuery("get", "/api/v1/projects");
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [error, setError] = useState("");
  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError("");
    try {
      await api.POST("/api/v1/projects", { body: { name, description } });
      invalidate("/api/v1/projects");
      navigate(path.project(name));
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <>
      <div className="pagehead">
        <h1>Projects</h1>
      </div>
      <div className="split">
        <div>
          {projects.error && (
            <p role="alert" className="error">
              {errorText(projects.error)}
            </p>
          )}
          <table aria-label="Projects">
            <thead>
              <tr>
                <th>Name</th>
                <th>Workflows</th>
                <th>Your role</th>
                <th>Description</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {projects.data?.map((p) => (
                <tr key={p.name}>
                  <td>
                    <Link href={path.workflows(p.name)}>{p.name}</Link>
                  </td>
                  <td>{p.workflows}</td>
                  <td>{p.role ?? "—"}</td>
                  <td>{p.description}</td>
                  <td className="right">
                    <Link href={path.project(p.name)}>Settings</Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {projects.data?.length === 0 && <p className="muted">You are not a member of any project yet.</p>}
        </div>
        <form className="card" onSubmit={create} aria-label="New project">
          <h2>New project</h2>
          <label>
            Name
            <input
              value={name}
              onChange={(e) => setName(e.target.value)}
              required
              pattern="[\p{L}\p{N}_][\p{L}\p{M}\p{N}_.\-]*"
              title="Letters and digits of any script, _ - or ., not starting with . or -"
            />
          </label>
          <label>
            Description
            <input value={description} onChange={(e) => setDescription(e.target.value)} />
          </label>
          {error && (
            <p role="alert" className="error">
              {error}
            </p>
          )}
          <div className="actions">
            <button type="submit">Create project</button>
          </div>
        </form>
      </div>
    </>
  );
}
