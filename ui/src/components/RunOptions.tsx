// What a run may set over its definition — failure strategy, worker group, timeout,
// environment, alert channels — as the start dialog, schedules and backfills ask for it.
import type { ReactNode } from "react";
import { $api } from "../api/cache";
import type { FailureStrategy } from "../api/types";

/** The options set; an unset (absent or blank) one leaves the definition's. */
export type RunOptions = {
  failure_strategy?: FailureStrategy;
  worker_group?: string;
  alert_channels?: string[];
  timeout?: string;
  environment?: string;
};

/** The options a stored schedule (or any answer with nullable fields) carries. */
export function runOptionsOf(stored: {
  failure_strategy?: FailureStrategy | null;
  worker_group?: string | null;
  alert_channels?: string[];
  timeout?: string | null;
  environment?: string | null;
}): RunOptions {
  return cleanRunOptions({
    failure_strategy: stored.failure_strategy ?? undefined,
    worker_group: stored.worker_group ?? undefined,
    alert_channels: stored.alert_channels,
    timeout: stored.timeout ?? undefined,
    environment: stored.environment ?? undefined,
  });
}

/** `o` as a request carries it: blank fields left out, names trimmed. */
export function cleanRunOptions(o: RunOptions): RunOptions {
  const out: RunOptions = {};
  if (o.failure_strategy) out.failure_strategy = o.failure_strategy;
  if (o.worker_group?.trim()) out.worker_group = o.worker_group.trim();
  if (o.alert_channels?.length) out.alert_channels = o.alert_channels;
  if (o.timeout?.trim()) out.timeout = o.timeout.trim();
  if (o.environment) out.environment = o.environment;
  return out;
}

export function RunOptionsFields({
  project,
  legend,
  value,
  onChange,
  definition,
  children,
}: {
  project: string;
  legend: string;
  value: RunOptions;
  onChange: (v: RunOptions) => void;
  /** The definition's own failure strategy and timeout, shown as what holds when unset. */
  definition?: { failure_strategy?: FailureStrategy; timeout?: string | null };
  /** More fields for the second row (the start dialog's start time). */
  children?: ReactNode;
}) {
  const envs = $api.useQuery("get", "/api/v1/projects/{project}/environments", { params: { path: { project } } });
  const alertChannels = $api.useQuery("get", "/api/v1/alert-channels");
  // Without a registry the api-server lists no nodes: the group is then typed freely.
  const nodes = $api.useQuery("get", "/api/v1/cluster", {}, { retry: false });
  const groups = [...new Set((nodes.data ?? []).filter((n) => n.role === "worker").flatMap((n) => n.groups))];
  const set = (patch: RunOptions) => onChange({ ...value, ...patch });
  const listId = `worker-groups-${legend.replace(/\W+/g, "-").toLowerCase()}`;
  return (
    <fieldset>
      <legend>{legend}</legend>
      <div className="options-grid">
        <label>
          Failure strategy
          <select
            value={value.failure_strategy ?? ""}
            onChange={(e) => set({ failure_strategy: (e.target.value || undefined) as FailureStrategy | undefined })}
          >
            <option value="">the workflow's{definition ? ` (${definition.failure_strategy ?? "end"})` : ""}</option>
            <option value="end">end</option>
            <option value="continue">continue</option>
          </select>
        </label>
        <label>
          Worker group
          <input
            value={value.worker_group ?? ""}
            onChange={(e) => set({ worker_group: e.target.value })}
            placeholder="the tasks' own"
            list={listId}
          />
          <datalist id={listId}>
            {groups.map((g) => (
              <option key={g} value={g} />
            ))}
          </datalist>
        </label>
        <label>
          Timeout
          <input
            value={value.timeout ?? ""}
            onChange={(e) => set({ timeout: e.target.value })}
            placeholder={definition?.timeout ?? "e.g. 30m"}
          />
        </label>
        <label>
          Environment
          <select value={value.environment ?? ""} onChange={(e) => set({ environment: e.target.value })}>
            <option value="">the tasks' or workflow's</option>
            {envs.data?.map((e) => (
              <option key={e.name}>{e.name}</option>
            ))}
          </select>
        </label>
        <label>
          Alert channels
          <select
            multiple
            value={value.alert_channels ?? []}
            onChange={(e) => set({ alert_channels: [...e.target.selectedOptions].map((o) => o.value) })}
            title="Replace the workflow's alert channels"
            disabled={!alertChannels.data?.length}
          >
            {alertChannels.data?.length ? (
              alertChannels.data.map((c) => <option key={c.name}>{c.name}</option>)
            ) : (
              <option value="" disabled>
                none defined
              </option>
            )}
          </select>
        </label>
        {children}
      </div>
    </fieldset>
  );
}
