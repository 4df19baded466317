// A workflow's triggers. Webhooks: each one's URL, who may call it and how its payload
// maps to parameters, and a form that calls it the way an outside system would (with the
// trigger's own credential, not the signed-in user's token). Broker triggers: what they
// consume and how their consumer fares.
import { useState } from "react";
import { $api, every } from "../api/cache";
import type { TriggerInfo } from "../api/types";
import { errorText, when } from "../components/format";

/** The Authorization header the trigger's credential makes. */
function authorization(kind: string, secret: string, user: string): string {
  return kind === "basic" ? `Basic ${btoa(`${user}:${secret}`)}` : `Bearer ${secret}`;
}

/** Outcomes in the order a message meets them. */
const OUTCOMES = ["started", "delivered", "filtered", "duplicate", "ignored"] as const;

/**
 * A broker trigger: what it consumes, its consumer's state and why it last failed, what
 * the messages it took did, and the ones it could not use.
 */
function BrokerTrigger({ project, t }: { project: string; t: TriggerInfo }) {
  const params = Object.entries(t.params);
  const c = t.consumer;
  return (
    <section className="card" aria-label={`Trigger ${t.name}`}>
      <h2>{t.name}</h2>
      <p>
        <code>
          {t.type} {t.consumes}
        </code>{" "}
        on <code>{t.url}</code>
        {t.event ? ` · delivers event ${t.event} by key ${t.key}` : t.key ? ` · one run per ${t.key}` : ""}
      </p>
      <p className="muted" aria-label="Consumer">
        {c ? (
          <>
            consumer <b>{c.state}</b> on <code>{c.master}</code> since {when(c.since)} · last message{" "}
            {c.last_message_at ? when(c.last_message_at) : "none yet"}
          </>
        ) : (
          "no consumer yet (a master starts one within seconds of an apply)"
        )}
      </p>
      {c?.error && (
        <p role="alert" className="error">
          {c.error}
        </p>
      )}
      {c && (
        <dl className="counts" aria-label="Messages since the consumer started">
          {OUTCOMES.map((o) => (
            <div key={o}>
              <dt>{o}</dt>
              <dd>{c.messages[o]}</dd>
            </div>
          ))}
        </dl>
      )}
      {params.length > 0 && <p className="muted">Parameters: {params.map(([p, jp]) => `${p} ← ${jp}`).join(", ")}</p>}
      <IgnoredMessages project={project} workflow={t.workflow} trigger={t.name} />
    </section>
  );
}

/** The messages a broker trigger could not use, newest first, with the reason. */
function IgnoredMessages({ project, workflow, trigger }: { project: string; workflow: string; trigger: string }) {
  const { data, error } = $api.useQuery(
    "get",
    "/api/v1/projects/{project}/workflows/{name}/triggers/{trigger}/ignored",
    { params: { path: { project, name: workflow, trigger } } },
    every(5000),
  );
  if (error)
    return (
      <p role="alert" className="error">
        {errorText(error)}
      </p>
    );
  if (!data) return null;
  if (data.length === 0) return <p className="muted">No ignored messages.</p>;
  return (
    <table aria-label={`Ignored messages of ${trigger}`}>
      <thead>
        <tr>
          <th>Received</th>
          <th>Reason</th>
          <th>Body (start)</th>
        </tr>
      </thead>
      <tbody>
        {data.map((m) => (
          <tr key={m.id}>
            <td>{when(m.received_at)}</td>
            <td>{m.reason}</td>
            <td>
              <code>{m.body}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A form trigger: its page, which anyone it lets in fills in without the web UI. */
function FormTrigger({ t }: { t: TriggerInfo }) {
  return (
    <section className="card" aria-label={`Trigger ${t.name}`}>
      <h2>{t.name}</h2>
      <p>
        Form:{" "}
        <a className="trigger-url" href={t.path ?? ""}>
          {`${window.location.origin}${t.path}`}
        </a>
      </p>
      <p className="muted">
        {t.access === "public"
          ? "anyone may submit it"
          : t.access === "login"
            ? "any signed-in user"
            : "the project's operators"}
        {" · "}fields {t.fields?.join(", ")}
        {t.rate && ` · at most ${t.rate}`}
        {t.allow_ips.length > 0 && ` · from ${t.allow_ips.join(", ")}`}
      </p>
    </section>
  );
}

function CallForm({ trigger, url }: { trigger: TriggerInfo; url: string }) {
  const [secret, setSecret] = useState("");
  const [user, setUser] = useState("");
  const [payload, setPayload] = useState("{}");
  const [key, setKey] = useState("");
  const [answer, setAnswer] = useState<{ status: number; body: string } | null>(null);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const call = async () => {
    setError("");
    setAnswer(null);
    try {
      JSON.parse(payload);
    } catch (e) {
      return setError(`The payload is not JSON: ${errorText(e)}`);
    }
    setBusy(true);
    try {
      const headers: Record<string, string> = {
        "Content-Type": "application/json",
        Authorization: authorization(trigger.auth, secret, user),
      };
      if (key.trim()) headers["Idempotency-Key"] = key.trim();
      // Straight to the hook: the shared client would send the user's token instead.
      const res = await fetch(url, { method: "POST", headers, body: payload });
      const text = await res.text();
      let body = text;
      try {
        body = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        // not JSON: shown as it came
      }
      setAnswer({ status: res.status, body });
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="trigger-call">
      <div className="row">
        {trigger.auth === "basic" && (
          <label>
            User
            <input value={user} onChange={(e) => setUser(e.target.value)} autoComplete="off" />
          </label>
        )}
        <label>
          {trigger.auth === "basic" ? "Password" : "Token"}
          <input type="password" value={secret} onChange={(e) => setSecret(e.target.value)} autoComplete="off" />
        </label>
        <label>
          Idempotency key
          <input value={key} placeholder="optional" onChange={(e) => setKey(e.target.value)} />
        </label>
      </div>
      <label>
        Payload (JSON)
        <textarea rows={4} value={payload} onChange={(e) => setPayload(e.target.value)} />
      </label>
      <button disabled={busy} onClick={call}>
        {busy && trigger.mode === "sync" ? "Waiting for the run…" : "Call"}
      </button>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {answer && (
        <section aria-label={`Answer of ${trigger.name}`}>
          <p>
            HTTP <b>{answer.status}</b>
          </p>
          <pre className="code">{answer.body}</pre>
        </section>
      )}
    </div>
  );
}

export function TriggersPanel({ project, name }: { project: string; name: string }) {
  // Polled: a broker trigger's consumer state and counts change as messages come.
  const { data, error } = $api.useQuery(
    "get",
    "/api/v1/projects/{project}/triggers",
    { params: { path: { project } } },
    every(5000),
  );
  if (error)
    return (
      <p role="alert" className="error">
        {errorText(error)}
      </p>
    );
  if (!data) return <p className="muted">Loading…</p>;
  const mine = data.filter((t) => t.workflow === name);
  if (mine.length === 0)
    return (
      <p className="muted">
        No triggers. Add{" "}
        <code>
          triggers: [{"{"}name, mode: async|sync, auth: {"{"}token: …{"}"}
          {"}"}]
        </code>{" "}
        to the definition to start runs from a webhook.
      </p>
    );
  return (
    <>
      {mine.map((t) => {
        if (t.path == null) return <BrokerTrigger key={t.name} project={project} t={t} />;
        if (t.type === "form") return <FormTrigger key={t.name} t={t} />;
        const url = `${window.location.origin}${t.path}`;
        const params = Object.entries(t.params);
        return (
          <section key={t.name} className="card" aria-label={`Trigger ${t.name}`}>
            <h2>{t.name}</h2>
            <p>
              <code className="trigger-url">POST {url}</code>
            </p>
            <p className="muted">
              {t.mode === "sync"
                ? `sync: answers with the run's state and outputs (waits up to ${t.timeout})`
                : "async: answers with the run at once"}
              {" · "}
              {t.auth === "basic" ? "HTTP Basic" : "bearer token"}
              {" · "}
              {t.allow_ips.length ? `from ${t.allow_ips.join(", ")}` : "from any address"}
              {t.outputs.length > 0 && ` · outputs ${t.outputs.join(", ")}`}
            </p>
            {params.length > 0 && (
              <p className="muted">Parameters: {params.map(([p, jp]) => `${p} ← ${jp}`).join(", ")}</p>
            )}
            <CallForm trigger={t} url={url} />
          </section>
        );
      })}
    </>
  );
}
