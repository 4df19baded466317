// Shapes of the API's answers. TODO(gen): replaced by aliases of the generated schema.
export type WorkflowState = string;
export type TaskState = string;

export interface WorkflowSummary {
  project: string;
  name: string;
  latest_version: number;
  updated_at: string;
  schedule?: { id: number; cron: string; timezone: string; enabled: boolean; next_fire: string | null } | null;
  last_run?: { id: number; state: WorkflowState; created_at: string; ended_at: string | null } | null;
}
export interface TaskDef {
  name: string;
  type: string;
  depends_on?: string[];
  [k: string]: unknown;
}
export interface Definition {
  name: string;
  project?: string;
  description?: string;
  params?: Record<string, string>;
  tasks: TaskDef[];
  [k: string]: unknown;
}
export interface StoredWorkflow {
  project: string;
  name: string;
  version: number;
  created_at: string;
  definition: Definition;
}
export interface InstanceSummary {
  id: number;
  project: string;
  workflow: string;
  version: number;
  state: WorkflowState;
  priority: string;
  run: number;
  schedule_time: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  message: string | null;
}
export interface TaskInstance {
  id: number;
  run: number;
  name: string;
  type: string;
  state: TaskState;
  attempt: number;
  worker: string | null;
  submitted_at: string;
  started_at: string | null;
  ended_at: string | null;
  exit_code: number | null;
  message: string | null;
  child_instance_id?: number | null;
}
export interface InstanceDetail extends InstanceSummary {
  params: Record<string, string>;
  master: string | null;
  tasks: TaskInstance[];
  parent_instance_id?: number | null;
}
export interface Schedule {
  id: number;
  cron: string;
  timezone: string;
  enabled: boolean;
  start_time: string | null;
  end_time: string | null;
  next_fire: string | null;
  [k: string]: unknown;
}
export interface Backfill {
  id: number;
  state: string;
  total: number;
  done: number;
  succeeded: number;
  failed: string[];
  workflow?: string;
  [k: string]: unknown;
}
export interface ClusterNode {
  role: string;
  addr: string;
  groups: string[];
  slots: number;
  running: number;
  started_at: string;
}
export interface TaskGroup {
  name: string;
  slots: number;
  in_use: number;
  waiting: number;
  description: string;
}
export interface AlertChannel {
  name: string;
  type: string;
  url?: string | null;
  format?: string;
}
export interface Alert {
  id: number;
  instance?: number;
  workflow_instance_id?: number;
  channel: string;
  event: string;
  state: string;
  attempts: number;
  last_error: string | null;
  created_at: string;
}
export interface Validated {
  name: string;
  tasks: { name: string; type: string; depends_on: string[] }[];
}
