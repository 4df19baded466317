//! Why a definition was refused.

/// Why a definition was refused. The message names the offending part.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DefinitionError {
    /// `line` and `column` (1-based) locate the error in the text when the parser knows.
    #[error("definition is not valid YAML or JSON: {message}")]
    Syntax {
        message: String,
        line: Option<usize>,
        column: Option<usize>,
    },
    #[error("invalid {what} '{value}': {}", super::name::explain(value))]
    BadName { what: &'static str, value: String },
    #[error("workflow '{0}' has no tasks")]
    Empty(String),
    #[error("task name '{0}' is used more than once")]
    DuplicateTask(String),
    #[error("task '{task}' has unknown type '{task_type}' (known: {known})")]
    UnknownType {
        task: String,
        task_type: String,
        known: String,
    },
    #[error("task '{task}' of type {task_type} needs '{field}'")]
    MissingField {
        task: String,
        task_type: &'static str,
        field: &'static str,
    },
    #[error("task '{task}' depends on '{dependency}', which is not a task of this workflow")]
    UnknownDependency { task: String, dependency: String },
    #[error("task '{task}': {reason}")]
    BadBranch { task: String, reason: String },
    #[error("tasks form a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    #[error("trigger '{trigger}': {reason}")]
    BadTrigger { trigger: String, reason: String },
    #[error("project '{given}' in the definition does not match '{expected}' in the URL")]
    ProjectMismatch { given: String, expected: String },
    #[error(
        "definition is larger than {limit} bytes once its YAML aliases (*name) are expanded: \
         repeat less through aliases, or raise the api-server's --max-body-bytes"
    )]
    TooLarge { limit: usize },
}

impl DefinitionError {
    /// Where in the text the error is (line, column; 1-based), for a syntax error whose
    /// parser knows.
    pub fn location(&self) -> Option<(usize, usize)> {
        match self {
            DefinitionError::Syntax {
                line: Some(line),
                column: Some(column),
                ..
            } => Some((*line, *column)),
            _ => None,
        }
    }

    /// The task the error is about, when it is about one task (for a cycle: the first
    /// task on it).
    pub fn task(&self) -> Option<&str> {
        match self {
            DefinitionError::Cycle(cycle) => cycle.first().map(String::as_str),
            DefinitionError::DuplicateTask(task)
            | DefinitionError::UnknownType { task, .. }
            | DefinitionError::MissingField { task, .. }
            | DefinitionError::UnknownDependency { task, .. }
            | DefinitionError::BadBranch { task, .. } => Some(task),
            DefinitionError::BadName {
                what: "task name",
                value,
            } => Some(value),
            _ => None,
        }
    }
}
