// Alert channels on the cluster page: where alerts go, and (global admins) create and delete.
import { useState } from "react";
import { $api, every } from "../api/cache";
import { api } from "../api/client";
import { useAction } from "../api/useAction";
import type { AlertChannel } from "../api/types";
import { NamedTable, NewNamedForm } from "../components/NamedTable";

type Kind = "webhook" | "log";
type Format = "json" | "slack";

export function AlertChannelsPanel({ manage }: { manage: boolean }) {
  const channels = $api.useQuery("get", "/api/v1/alert-channels", {}, every(5000));
  const [name, setName] = useState("");
  const [kind, setKind] = useState<Kind>("webhook");
  const [url, setUrl] = useState("");
  const [format, setFormat] = useState<Format>("json");
  const { busy, error, run } = useAction(channels.refetch);
  const create = async () => {
    const body: AlertChannel = kind === "webhook" ? { name, type: kind, url, format } : { name, type: kind };
    if (await run(() => api.POST("/api/v1/alert-channels", { body }))) {
      setName("");
      setUrl("");
    }
  };
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
              <code>{c.url ?? "master log"}</code>
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
                  <option value="json">json</option>
                  <option value="slack">slack</option>
                </select>
              </label>
            </>
          )}
        </NewNamedForm>
      )}
    </div>
  );
}
