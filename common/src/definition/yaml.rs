//! A definition written back as YAML, without the fields that hold their default value:
//! close to what its author wrote, and it parses back to the same definition.

use super::WorkflowDef;
use serde_norway::Value;

impl WorkflowDef {
    /// The definition as YAML, fields at their default left out but `name`, `tasks` (and
    /// each task's `name` and `type`) and the top-level fields named in `keep`.
    pub fn to_yaml(&self, keep: &[&str]) -> String {
        // YAML mappings keep the fields in declaration order (name first).
        let mut value = serde_norway::to_value(self).unwrap_or(Value::Null);
        // Defaults do not depend on other fields, so one minimal definition shows them all.
        let minimal = WorkflowDef::parse("name: d\ntasks: [{name: t, type: noop}]")
            .ok()
            .and_then(|d| serde_norway::to_value(d).ok())
            .unwrap_or(Value::Null);
        let kept: Vec<&str> = ["name", "tasks"].iter().chain(keep).copied().collect();
        drop_defaults(&mut value, &minimal, &kept);
        if let (Some(tasks), Some(default)) = (
            value.get_mut("tasks").and_then(Value::as_sequence_mut),
            minimal.get("tasks").and_then(|t| t.get(0)),
        ) {
            for task in tasks {
                drop_defaults(task, default, &["name", "type"]);
            }
        }
        // A definition is plain data: rendering it cannot fail.
        serde_norway::to_string(&value).unwrap_or_default()
    }
}

/// Removes the keys of `value` (but `keep`) whose value is the one in `defaults`.
fn drop_defaults(value: &mut Value, defaults: &Value, keep: &[&str]) {
    if let Some(map) = value.as_mapping_mut() {
        map.retain(|k, v| {
            k.as_str().is_some_and(|k| keep.contains(&k)) || defaults.get(k) != Some(v)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_yaml_leaves_out_defaults_and_reads_back_the_same() {
        let text = "name: w\nproject: etl\nparams: {dt: x}\ntasks:\n- {name: a, type: shell, command: echo}\n- {name: b, type: noop, depends_on: [a], priority: high, worker_group: gpu}\n";
        let def = WorkflowDef::parse(text).unwrap();
        let yaml = def.to_yaml(&[]);
        assert_eq!(WorkflowDef::parse(&yaml).unwrap(), def, "{yaml}");
        for default in [
            "timeout_strategy",
            "failure_strategy",
            "priority: medium",
            "worker_group: default",
        ] {
            assert!(!yaml.contains(default), "{default} in\n{yaml}");
        }
        for kept in [
            "project: etl",
            "dt: x",
            "priority: high",
            "worker_group: gpu",
            "command: echo",
        ] {
            assert!(yaml.contains(kept), "{kept} missing in\n{yaml}");
        }
    }

    #[test]
    fn fields_asked_for_are_kept_at_their_default() {
        let def = WorkflowDef::parse("name: w\ntasks: [{name: a, type: noop}]").unwrap();
        assert!(!def.to_yaml(&[]).contains("project"));
        assert!(def.to_yaml(&["project"]).contains("project: default"));
    }
}
