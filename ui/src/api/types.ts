// Shapes of the API's answers: aliases of the types openapi-typescript generates from the
// server's OpenAPI document (ui/openapi.json, `npm run gen`), so the UI and the API cannot
// drift — a field the server renames or drops fails `tsc`.
import type { components } from "./schema";

type S = components["schemas"];

export type WorkflowState = S["WorkflowState"];
export type TaskState = S["TaskState"];
export type WorkflowSummary = S["WorkflowSummary"];
export type TaskDef = S["TaskDef"];
export type Definition = S["WorkflowDef"];
export type StoredWorkflow = S["Workflow"];
export type WorkflowVersion = S["WorkflowVersion"];
export type InstanceSummary = S["InstanceSummary"];
export type InstanceDetail = S["InstanceDetail"];
export type ActionOffer = S["ActionOffer"];
export type TaskInstance = S["TaskInstance"];
export type ExternalQueue = S["ExternalQueue"];
export type Schedule = S["Schedule"];
export type CronPreview = S["CronPreview"];
export type Backfill = S["Backfill"];
export type BackfillCreated = S["BackfillCreated"];
export type ClusterNode = S["Node"];
export type TaskGroup = S["TaskGroup"];
export type AlertChannel = S["AlertChannel"];
export type Alert = S["Alert"];
export type Validated = S["Validated"];
export type ErrorBody = S["ErrorBody"];
export type Project = S["Project"];
export type CommandStatus = S["CommandStatus"];
export type StartAccepted = S["StartAccepted"];
export type Role = S["ProjectRole"];
export type Session = S["Session"];
export type ProjectDetail = S["ProjectDetail"];
export type Member = S["Member"];
export type User = S["User"];
export type Token = S["Token"];
export type CreatedToken = S["CreatedToken"];
export type AuditRecord = S["AuditRecord"];
export type Secret = S["Secret"];
export type TriggerInfo = S["TriggerInfo"];
export type StartRequest = S["StartRequest"];
export type BackfillRequest = S["BackfillRequest"];
export type Priority = S["Priority"];
export type FailureStrategy = S["FailureStrategy"];
export type Scope = S["Scope"];
