import { useState, type FormEvent } from "react";
import { checkToken, setToken } from "../api/client";
import { useTitle } from "../router";

/** Shown when the server asks for a token; the token lives for the browser session. */
export function SignIn() {
  useTitle("Sign in");
  const [value, setValue] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError("");
    try {
      if (await checkToken(value.trim())) setToken(value.trim());
      else setError("That token was refused by the server. Check it and try again.");
    } catch {
      setError("The server did not answer; try again.");
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="signin">
      <form onSubmit={submit} className="card">
        <h1>Sign in</h1>
        <p className="muted">
          This shoal server needs an API token: yours (<code>shoal token create</code>, or from an admin), the one its
          first start printed for the admin, or its <code>SHOAL_TOKEN</code>.
        </p>
        <label>
          Token
          <input
            type="password"
            value={value}
            onChange={(e) => setValue(e.target.value)}
            autoFocus
            required
            autoComplete="current-password"
          />
        </label>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </div>
  );
}
