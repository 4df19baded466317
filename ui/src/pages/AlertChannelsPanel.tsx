// Alert channels on the cluster page: where alerts go, and (global admins) create and delete.
import { useState } from "react";
import { $api, every, invalidate } from "../api/cache";
import { api } from "../api/client";
import { useAction } from "../api/useAction";
import type { AlertChannel } from "../api/types";
import { NamedTable, NewNamedForm } from "../components/NamedTable";

type Kind = "webhook" | "email" | "log";
type Format = NonNullable<AlertChannel["format"]>;
const FORMATS: Format[] = ["json", "slack", "dingtalk", "wecom", "feishu", "telegram"];

export function AlertChannelsPanel({ manage }: { manage: boolean }) {
  const channels = $api.useQuery("get", "/api/v1/alert-channels", {}, every(5000));
  const [name, setName] = useState("");
  const [kind, setKind] = useState<Kind>("webhook");
  const [url, setUrl] = useState("");
  const [format, setFormat] = useState<Format>("json");
  const [mail, setMail] = useState({ smtp: "", from: "", to: "", username: "", password: "" });
  // The channels are offered by the run forms too.
  const { busy, error, run } = useAction(() => invalidate("/api/v1/alert-channels"));
  const email = (): AlertChannel => ({
    name,
    type: "email",
    smtp: mail.smtp,
    from: mail.from,
    to: mail.to.split(",").map((a) => a.trim()),
    ...(mail.username ? { username: mail.username, password: mail.password || undefined } : {}),
  });
  const create = async () => {
    const body: AlertChannel =
      kind === "webhook" ? { name, type: kind, url, format } : kind === "email" ? email() : { name, type: kind };
    if (await run(() => api.POST("/api/v1/alert-channels", { body }))) {
      setName("");
      setUrl("");
      setMail({ smtp: "", from: "", to: "", username: "", password: "" });
    }
  };
  const mailField = (field: keyof typeof mail, label: string, placeholder: string, type = "text") => (
    <label>
      {label}
      <input
        type={type}
        value={mail[field]}
        onChange={(e) => setMail({ ...mail, [field]: e.target.value })}
        required={field === "smtp" || field === "from" || field === "to"}
        placeholder={placeholder}
      />
    </label>
  );
  return (
    <div>
      <NamedTable
        title="Alert channels"
        noun="alert channel"
        headers={["Type", "Target"]}
        rows={channels.data}
        cells={(c) => (
          <>
            <td>
              {c.type}
              {c.format && c.format !== "json" ? ` (${c.format})` : ""}
            </td>
            <td>
              <code>{c.url ?? (c.smtp ? `${c.smtp} → ${(c.to ?? []).join(", ")}` : "master log")}</code>
            </td>
          </>
        )}
        error={error || channels.error}
        empty="No alert channels: a workflow's `alerts` name the channels its runs' ends go to."
        busy={busy}
        onDelete={
          manage
            ? (c) => run(() => api.DELETE("/api/v1/alert-channels/{name}", { params: { path: { name: c.name } } }))
            : undefined
        }
      />
      {manage && (
        <NewNamedForm noun="alert channel" name={name} setName={setName} busy={busy} onCreate={create}>
          <label>
            Type
            <select value={kind} onChange={(e) => setKind(e.target.value as Kind)}>
              <option value="webhook">webhook</option>
              <option value="email">email</option>
              <option value="log">log (the master's log)</option>
            </select>
          </label>
          {kind === "webhook" && (
            <>
              <label>
                URL
                <input
                  type="url"
                  value={url}
                  onChange={(e) => setUrl(e.target.value)}
                  required
                  placeholder="https://hooks.example.com/shoal"
                />
              </label>
              <label>
                Format
                <select value={format} onChange={(e) => setFormat(e.target.value as Format)}>
                  {FORMATS.map((f) => (
                    <option key={f} value={f}>
                      {f}
                    </option>
                  ))}
                </select>
              </label>
            </>
          )}
          {kind === "email" && (
            <>
              {mailField("smtp", "SMTP server", "smtp://mail.example.com:587?tls=required")}
              {mailField("from", "From", "shoal@example.com")}
              {mailField("to", "To (comma-separated)", "oncall@example.com")}
              {mailField("username", "Username", "optional")}
              {mailField("password", "Password", "stored encrypted", "password")}
            </>
          )}
        </NewNamedForm>
      )}
    </div>
  );
}
