// Who I am on this server, my roles, and my API tokens.
import { useState, type FormEvent } from "react";
import { $api } from "../api/cache";
import { answer, api } from "../api/client";
import { useSession } from "../api/session";
import type { CreatedToken } from "../api/types";
import { errorText, when } from "../components/format";
import { NewToken } from "../components/NewToken";
import { Link, path, useTitle } from "../router";

export function AccountPage() {
  useTitle("Tokens");
  const session = useSession();
  const isUser = session?.auth && session.user !== "SHOAL_TOKEN";
  const tokens = $api.useQuery("get", "/api/v1/tokens", {}, { enabled: !!isUser });
  const [name, setName] = useState("");
  const [days, setDays] = useState("");
  const [created, setCreated] = useState<CreatedToken>();
  const [error, setError] = useState("");
  const run = async (what: () => Promise<unknown>) => {
    setError("");
    try {
      await what();
      tokens.refetch();
    } catch (e) {
      setError(errorText(e));
    }
  };
  const create = (e: FormEvent) => {
    e.preventDefault();
    const body = { name, expires_in_days: days ? Number(days) : null };
    run(async () => setCreated(await answer(api.POST("/api/v1/tokens", { body })))).then(() => setName(""));
  };
  if (session && !session.auth) {
    return (
      <>
        <h1>Tokens</h1>
        <p className="muted">
          This server runs without auth (a standalone on loopback): there are no tokens. Start it with --auth to use
          them.
        </p>
      </>
    );
  }
  return (
    <>
      <div className="pagehead">
        <h1>Tokens</h1>
      </div>
      {session && (
        <p>
          Signed in as <strong>{session.user}</strong>
          {session.admin ? " (global admin)" : ""}.{" "}
          {Object.entries(session.roles).map(([p, r]) => (
            <span key={p} className="badge tone-none role">
              <Link href={path.project(p)}>{p}</Link>: {r}
            </span>
          ))}
        </p>
      )}
      {!isUser && session && (
        <p className="muted">The server's SHOAL_TOKEN is not a user's: it has no tokens of its own.</p>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {isUser && (
        <div className="split">
          <table aria-label="Tokens">
            <thead>
              <tr>
                <th>Name</th>
                <th>Created</th>
                <th>Expires</th>
                <th>Last used</th>
                <th>State</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {tokens.data?.map((t) => (
                <tr key={t.id}>
                  <td>{t.name}</td>
                  <td>{when(t.created_at)}</td>
                  <td>{when(t.expires_at)}</td>
                  <td>{when(t.last_used_at)}</td>
                  <td>{t.revoked_at ? `revoked ${when(t.revoked_at)}` : "active"}</td>
                  <td className="right">
                    {!t.revoked_at && (
                      <button
                        type="button"
                        onClick={() => run(() => api.DELETE("/api/v1/tokens/{id}", { params: { path: { id: t.id } } }))}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <div>
            <form className="card" onSubmit={create} aria-label="New token">
              <h2>New token</h2>
              <div className="row">
                <label>
                  Name
                  <input value={name} onChange={(e) => setName(e.target.value)} required placeholder="e.g. ci" />
                </label>
                <label>
                  Expires in days
                  <input
                    type="number"
                    min={1}
                    max={3650}
                    value={days}
                    onChange={(e) => setDays(e.target.value)}
                    placeholder="never"
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
      )}
    </>
  );
}
