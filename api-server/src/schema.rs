//! `GET /schema/workflow`: the JSON Schema of a workflow definition, for editors that build
//! forms from it (the web UI's visual editor). It is derived from the Rust types the
//! validator parses into (their `ToSchema`, the same the OpenAPI document describes), so a
//! field added to a definition appears in the editors without changes there.

use axum::Json;
use serde_json::{Map, Value, json};
use shoal_common::definition::WorkflowDef;
use shoal_common::types::TaskType;
use utoipa::openapi::{RefOr, schema::Schema};
use utoipa::{PartialSchema, ToSchema};

/// Where OpenAPI references point, and where a standalone JSON Schema's point instead.
const COMPONENTS: &str = "#/components/schemas/";
const DEFS: &str = "#/$defs/";

/// The JSON Schema (2020-12) of a workflow definition, YAML or JSON.
#[utoipa::path(
    get,
    path = "/schema/workflow",
    operation_id = "getWorkflowSchema",
    tag = "workflows",
    responses((
        status = 200,
        description = "The JSON Schema (2020-12) of a workflow definition: the `WorkflowDef` \
            schema with the schemas it refers to under `$defs`; `$defs.TaskDef.properties.type` \
            lists the task types, and `x-task-fields` names the task fields each type has of \
            its own (the others are every task's)",
        body = Object
    ))
)]
pub(crate) async fn workflow() -> Json<Value> {
    Json(document())
}

/// The schema document; built per request (a few kilobytes, rarely asked for).
fn document() -> Value {
    let mut parts: Vec<(String, RefOr<Schema>)> = Vec::new();
    <WorkflowDef as ToSchema>::schemas(&mut parts);
    let mut defs: Map<String, Value> = parts
        .into_iter()
        .map(|(name, schema)| (name, to_value(&schema)))
        .collect();
    let types: Vec<&str> = TaskType::ALL.iter().map(|t| t.as_str()).collect();
    if let Some(task_type) = defs
        .get_mut("TaskDef")
        .and_then(|t| t.pointer_mut("/properties/type"))
    {
        task_type["enum"] = json!(types);
    }
    let fields: Map<String, Value> = TaskType::ALL
        .iter()
        .map(|t| (t.as_str().to_string(), json!(t.fields())))
        .collect();
    let mut doc = to_value(&WorkflowDef::schema());
    doc["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    doc["title"] = json!("WorkflowDef");
    doc["$defs"] = Value::Object(defs);
    doc["x-task-fields"] = Value::Object(fields);
    doc
}

/// A schema as JSON, its references pointing into `$defs`.
fn to_value(schema: &RefOr<Schema>) -> Value {
    let mut v = serde_json::to_value(schema).expect("a schema serializes");
    each_ref(&mut v, &mut |r| {
        if let Some(name) = r.strip_prefix(COMPONENTS) {
            *r = format!("{DEFS}{name}");
        }
    });
    v
}

/// Calls `f` on every `$ref` in `v`.
fn each_ref(v: &mut Value, f: &mut impl FnMut(&mut String)) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                match child {
                    Value::String(s) if k == "$ref" => f(s),
                    _ => each_ref(child, f),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|c| each_ref(c, f)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reference resolves within the document, so a form builder needs nothing else.
    #[test]
    fn every_reference_resolves_in_defs() {
        let mut doc = document();
        let mut refs = Vec::new();
        each_ref(&mut doc, &mut |r| refs.push(r.clone()));
        assert!(refs.iter().any(|r| r == "#/$defs/TaskDef"));
        for r in refs {
            let name = r
                .strip_prefix(DEFS)
                .unwrap_or_else(|| panic!("foreign $ref {r}"));
            assert!(doc["$defs"].get(name).is_some(), "{r} is not in $defs");
        }
    }

    #[test]
    fn each_type_s_own_fields_are_task_properties() {
        let doc = document();
        let task = &doc["$defs"]["TaskDef"]["properties"];
        assert_eq!(
            task["type"]["enum"].as_array().unwrap().len(),
            TaskType::ALL.len()
        );
        for t in TaskType::ALL {
            for f in t.fields() {
                assert!(task.get(*f).is_some(), "{t}: {f} is not a TaskDef property");
            }
        }
    }
}
