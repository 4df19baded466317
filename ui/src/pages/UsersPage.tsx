// Users (global admins): create, disable or enable, and give one a token.
import { useState, type FormEvent } from "react";
import { $api } from "../api/cache";
import { answer, api } from "../api/client";
import type { CreatedToken } from "../api/types";
import { errorText, when } from "../components/format";
import { NewToken } from "../components/NewToken";
import { useTitle } from "../router";

export function UsersPage() {
  useTitle("Users");
  const users = $api.useQuery("get", "/api/v1/users");
  const [name, setName] = useState("");
  const [admin, setAdmin] = useState(false);
  const [tokenUser, setTokenUser] = useState("");
  const [tokenName, setTokenName] = useState("");
  const [created, setCreated] = useState<CreatedToken>();
  const [error, setError] = useState("");
  const run = async (what: () => Promise<unknown>) => {
    setError("");
    try {
      await what();
      users.refetch();
      return true;
    } catch (e) {
      setError(errorText(e));
      return false;
    }
  };
  const enable = (name: string) => api.POST("/api/v1/users/{name}/enable", { params: { path: { name } } });
  const disable = (name: string) => api.POST("/api/v1/users/{name}/disable", { params: { path: { name } } });
  const createUser = async (e: FormEvent) => {
    e.preventDefault();
    if (await run(() => api.POST("/api/v1/users", { body: { name, admin } }))) {
      setTokenUser(name);
      setName("");
      setAdmin(false);
    }
  };
  const createToken = async (e: FormEvent) => {
    e.preventDefault();
    const body = { name: tokenName, user: tokenUser };
    await run(async () => setCreated(await answer(api.POST("/api/v1/tokens", { body }))));
  };
  return (
    <>
      <div className="pagehead">
        <h1>Users</h1>
      </div>
      {(error || users.error) && (
        <p role="alert" className="error">
          {error || errorText(users.error)}
        </p>
      )}
      <div className="split">
        <table aria-label="Users">
          <thead>
            <tr>
              <th>Name</th>
              <th>Global admin</th>
              <th>State</th>
              <th>Created</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {users.data?.map((u) => (
              <tr key={u.name}>
                <td>{u.name}</td>
                <td>{u.admin ? "yes" : "no"}</td>
                <td>{u.disabled ? "disabled" : "active"}</td>
                <td>{when(u.created_at)}</td>
                <td className="right">
                  <button type="button" onClick={() => run(() => (u.disabled ? enable(u.name) : disable(u.name)))}>
                    {u.disabled ? "Enable" : "Disable"}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <div>
          <form className="card" onSubmit={createUser} aria-label="New user">
            <h2>New user</h2>
            <label>
              Name
              <input value={name} onChange={(e) => setName(e.target.value)} required />
            </label>
            <label className="inline">
              <input type="checkbox" checked={admin} onChange={(e) => setAdmin(e.target.checked)} /> Global admin
            </label>
            <div className="actions">
              <button type="submit">Create user</button>
            </div>
          </form>
          <form className="card" onSubmit={createToken} aria-label="New token for a user">
            <h2>New token for a user</h2>
            <div className="row">
              <label>
                User
                <select value={tokenUser} onChange={(e) => setTokenUser(e.target.value)} required>
                  <option value="">choose…</option>
                  {users.data?.map((u) => (
                    <option key={u.name}>{u.name}</option>
                  ))}
                </select>
              </label>
              <label>
                Token name
                <input
                  value={tokenName}
                  onChange={(e) => setTokenName(e.target.value)}
                  required
                  placeholder="e.g. laptop"
                />
              </label>
            </div>
            <div className="actions">
              <button type="submit">Create token</button>
            </div>
          </form>
          {created && <NewToken created={created} />}
        </div>
      </div>
    </>
  );
}
