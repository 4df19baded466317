//! `shoal workflow list|show|versions|diff|export` against `shoal standalone`, as a user
//! reads workflows from a terminal.

mod support;

use serde_json::{Value, json};
use support::{Standalone, cli, text};

const V1: &str = "\
name: etl
tasks:
  - { name: extract, type: shell, command: 'echo one' }
  - { name: load, type: noop, depends_on: [extract] }
";

/// Runs `shoal ARGS...`, which must succeed; its standard output.
fn ok(s: &Standalone, args: &[&str]) -> String {
    let out = cli(&s.api, args);
    assert!(
        out.status.success(),
        "shoal {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs `shoal ARGS...` with `-o json`, which must succeed; its answer.
fn json(s: &Standalone, args: &[&str]) -> Value {
    let args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
    serde_json::from_str(&ok(s, &args)).unwrap()
}

/// Field `key` of each element of a JSON array.
fn each(list: &Value, key: &str) -> Vec<Value> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v[key].clone())
        .collect()
}

/// Writes `yaml` to a file and applies it; what apply printed.
fn apply(s: &Standalone, file: &str, yaml: &str) -> String {
    let path = s.dir.path().join(file);
    std::fs::write(&path, yaml).unwrap();
    ok(s, &["apply", "-f", path.to_str().unwrap()])
}

#[test]
fn workflows_are_listed_shown_compared_and_exported_from_the_cli() {
    let s = Standalone::start();
    apply(&s, "v1.yaml", V1);
    apply(&s, "v2.yaml", &V1.replace("echo one", "echo two"));
    apply(
        &s,
        "report.yaml",
        "name: report\ntasks: [{ name: a, type: noop }]\n",
    );

    let table = ok(&s, &["workflow", "list"]);
    let etl = table.lines().find(|l| l.starts_with("etl ")).unwrap();
    assert!(table.starts_with("NAME"), "{table}");
    assert!(etl.contains(" 2 ") && etl.contains("online"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("report ")), "{table}");
    let list = json(&s, &["workflow", "list"]);
    assert_eq!(each(&list, "name"), [json!("etl"), json!("report")]);

    let versions = json(&s, &["workflow", "versions", "etl"]);
    assert_eq!(
        each(&versions, "version"),
        [json!(2), json!(1)],
        "newest first"
    );
    let table = ok(&s, &["workflow", "versions", "etl"]);
    assert_eq!(table.lines().count(), 3, "{table}");

    let shown = ok(&s, &["workflow", "show", "etl"]);
    assert!(
        shown.starts_with("workflow  default/etl version 2 (online)"),
        "{shown}"
    );
    assert!(
        shown.contains("echo two") && !shown.contains("echo one"),
        "{shown}"
    );
    let old = ok(&s, &["workflow", "show", "etl", "--version", "1"]);
    assert!(old.contains("echo one"), "{old}");
    let shown = json(&s, &["workflow", "show", "etl"]);
    assert_eq!(shown["version"], 2);
    assert_eq!(shown["definition"]["tasks"][0]["command"], "echo two");

    let diff = ok(&s, &["workflow", "diff", "etl"]);
    assert!(
        diff.starts_with("--- etl version 1\n+++ etl version 2\n"),
        "{diff}"
    );
    let changed: Vec<&str> = diff
        .lines()
        .skip(2)
        .filter(|l| l.starts_with(['-', '+']))
        .collect();
    assert_eq!(changed.len(), 2, "{diff}");
    assert!(
        changed[0].starts_with('-') && changed[0].contains("echo one"),
        "{diff}"
    );
    assert!(
        changed[1].starts_with('+') && changed[1].contains("echo two"),
        "{diff}"
    );
    let same = ok(&s, &["workflow", "diff", "etl", "--from", "2", "--to", "2"]);
    assert_eq!(same, "versions 2 and 2 are the same\n");

    // What export prints applies back as the same definition: no new version.
    let exported = ok(&s, &["workflow", "export", "etl"]);
    let again = apply(&s, "exported.yaml", &exported);
    assert_eq!(again, "unchanged default/etl version 2\n");
    assert_eq!(json(&s, &["workflow", "versions", "etl"]), versions);
}

#[test]
fn an_exported_workflow_of_another_project_with_a_trigger_applies_back_unchanged() {
    let s = Standalone::start();
    let yaml = "\
name: deploy
project: sales
params: { env: staging }
triggers:
  - { name: on_merge, auth: { token: a-literal-token-of-32-characters } }
tasks:
  - { name: ship, type: shell, command: 'echo ${env}', retries: 2 }
";
    assert_eq!(
        apply(&s, "deploy.yaml", yaml),
        "applied sales/deploy version 1\n"
    );
    let exported = ok(&s, &["workflow", "export", "deploy", "--project", "sales"]);
    // The trigger's token is stored as a hash and shown masked, never as written.
    assert!(!exported.contains("a-literal-token"), "{exported}");
    assert!(exported.contains("project: sales"), "{exported}");
    assert_eq!(
        apply(&s, "exported.yaml", &exported),
        "unchanged sales/deploy version 1\n"
    );
}

#[test]
fn a_workflow_that_does_not_exist_is_an_error_naming_it() {
    let s = Standalone::start();
    apply(&s, "v1.yaml", V1);
    for args in [
        &["workflow", "show", "nope"][..],
        &["workflow", "versions", "nope"],
        &["workflow", "diff", "nope"],
        &["workflow", "export", "nope"],
    ] {
        let out = cli(&s.api, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("workflow 'default/nope' does not exist"),
            "{args:?}: {err}"
        );
        assert!(text(&out.stdout).is_empty(), "{args:?}");
    }
    let out = cli(&s.api, &["workflow", "show", "etl", "--version", "7"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("has no version 7 (latest is 1)"));
    let out = cli(&s.api, &["workflow", "diff", "etl"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("has one version only"));
}
