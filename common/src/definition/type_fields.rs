//! Which fields of a task belong to its type, for editors that show a task's own settings
//! apart from those every task has (the API's workflow schema, the web UI's task form).

use crate::types::TaskType;

impl TaskType {
    /// The `TaskDef` fields only tasks of this type read (the others are every task's).
    /// The field validation requires of the type, if any, is among them.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            TaskType::Shell => &["command", "environment"],
            TaskType::Python => &["script", "environment"],
            TaskType::Http => &["http"],
            TaskType::Sql => &["sql"],
            TaskType::Conditions => &["conditions"],
            TaskType::Switch => &["switch"],
            TaskType::SubWorkflow => &["sub_workflow"],
            TaskType::Dependent => &["dependent"],
            TaskType::Wait => &["event", "key", "on_timeout"],
            TaskType::Callback => &["callback", "on_timeout"],
            TaskType::Terminate => &["terminate"],
            TaskType::Foreach => &["foreach"],
            TaskType::DoWhile => &["do_while"],
            TaskType::External => &["queue", "lease", "on_timeout"],
            TaskType::Spark => &["spark"],
            TaskType::Notebook => &["notebook"],
            TaskType::Container => &["container"],
            TaskType::Kubernetes => &["kubernetes"],
            TaskType::Publish => &["publish"],
            TaskType::Noop | TaskType::Delay => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::definition::{DefinitionError, WorkflowDef};
    use crate::types::TaskType;

    #[test]
    fn the_field_a_type_requires_is_one_of_its_own() {
        for kind in TaskType::ALL {
            let yaml = format!("name: w\ntasks:\n- {{name: t, type: {kind}}}\n");
            if let Err(DefinitionError::MissingField { field, .. }) = WorkflowDef::parse(&yaml) {
                assert!(kind.fields().contains(&field), "{kind} requires {field}");
            }
        }
    }
}
