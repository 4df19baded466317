//! Names in the user's own language (issue 34): a project, workflow and tasks named in
//! Chinese, Japanese and with accents are applied, started from the CLI, run to success
//! with a task's outputs read downstream by its Chinese name, shown by the CLI, and found
//! through percent-encoded API paths, a decomposed accent included (names are NFC).

mod support;

use support::{Env, attempts, cli, text};

support::deployments!(names_in_any_script_apply_run_and_show);

const PROJECT: &str = "数据仓库";
const WORKFLOW: &str = "日次集計";

/// `café_検査` as macOS may type it: `e` and a combining acute accent (U+0301).
const DECOMPOSED: &str = "cafe\u{301}_検査";
/// The same name in NFC, as it is stored and shown.
const COMPOSED: &str = "caf\u{e9}_検査";

/// `s` percent-encoded as a path segment (every byte but ASCII letters and digits).
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b.is_ascii_alphanumeric() {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect()
}

fn ok(e: &Env, args: &[&str]) -> String {
    let out = cli(e.api(), args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn names_in_any_script_apply_run_and_show(e: Env) {
    let (status, body) = e
        .api()
        .post("/projects", &format!(r#"{{"name": "{PROJECT}"}}"#));
    assert_eq!(status, 201, "{body}");
    // A name that is a path, or holds a space, is refused naming the problem.
    for (bad, says) in [("工作/流", "'/'"), ("a b", "a space"), ("..", "'.'")] {
        let (status, body) = e
            .api()
            .post("/projects", &format!(r#"{{"name": "{bad}"}}"#));
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }

    // The conditions task is named with a decomposed accent and referred to with the
    // composed one; its `when` reads the first task's output by the task's Chinese name.
    let yaml = format!(
        r#"name: {WORKFLOW}
project: {PROJECT}
tasks:
  - {{ name: 前置sql节点, type: shell, command: "echo '${{setValue(rows=3)}}'" }}
  - name: {DECOMPOSED}
    type: conditions
    depends_on: [前置sql节点]
    conditions: {{ when: "outputs['前置sql节点'].rows == 3", success: [データ取り込み], failure: [失败处理] }}
  - {{ name: データ取り込み, type: shell, depends_on: [{COMPOSED}], command: 'echo "loaded ${{rows}} rows"' }}
  - {{ name: 失败处理, type: shell, depends_on: [{COMPOSED}], command: 'echo failed' }}
"#
    );
    let file = e.path("wf.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let applied = ok(&e, &["apply", "-f", file.to_str().unwrap()]);
    assert_eq!(applied, format!("applied {PROJECT}/{WORKFLOW} version 1\n"));
    let bad = yaml.replace("データ取り込み, type", "データ 取り込み, type");
    std::fs::write(&file, bad).unwrap();
    let out = cli(e.api(), &["apply", "-f", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("invalid task name 'データ 取り込み': it contains a space"),
        "{}",
        text(&out.stderr)
    );

    // The CLI takes the names as arguments and prints them.
    let id: i64 = ok(&e, &["start", WORKFLOW, "--project", PROJECT, "--wait"])
        .trim()
        .parse()
        .unwrap();
    let inst = e.api().get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "success", "{inst:#}");
    assert_eq!(inst["workflow"], WORKFLOW);
    assert_eq!(inst["project"], PROJECT);
    let state = |task: &str| attempts(&inst, task)[0]["state"].clone();
    assert_eq!(state("前置sql节点"), "success");
    assert_eq!(state(COMPOSED), "success");
    assert_eq!(state("データ取り込み"), "success", "{inst:#}");
    assert!(attempts(&inst, "失败处理").is_empty(), "{inst:#}");
    let load = attempts(&inst, "データ取り込み")[0]["id"].as_i64().unwrap();
    let (_, log) = e.api().log(load);
    assert!(log.contains("loaded 3 rows"), "{log}");

    let list = ok(&e, &["workflow", "list", "--project", PROJECT]);
    assert!(
        list.lines().any(|l| l.starts_with(&format!("{WORKFLOW} "))),
        "{list}"
    );
    let shown = ok(&e, &["workflow", "show", WORKFLOW, "--project", PROJECT]);
    assert!(
        shown.contains(COMPOSED) && !shown.contains(DECOMPOSED),
        "{shown}"
    );
    let status = ok(&e, &["status", &id.to_string()]);
    assert!(
        status.contains(WORKFLOW) && status.contains("データ取り込み"),
        "{status}"
    );

    // Percent-encoded paths, the decomposed spelling finding the composed name.
    let path = format!("/projects/{}/workflows/{}", enc(PROJECT), enc(WORKFLOW));
    let wf = e.api().get(&path);
    assert_eq!(wf["name"], WORKFLOW, "{wf}");
    let by_query = e
        .api()
        .get(&format!("/instances?workflow={}", enc(WORKFLOW)));
    assert_eq!(by_query[0]["id"], id, "{by_query}");
    let (status, body) = e.api().post(
        &format!(
            "/projects/{}/workflows/{}/start",
            enc(PROJECT),
            enc(WORKFLOW)
        ),
        "{}",
    );
    assert_eq!(status, 202, "{body}");
    let cafe = "cafe\u{301}";
    let (status, body) = e
        .api()
        .post("/projects", &format!(r#"{{"name": "{cafe}"}}"#));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["name"], "caf\u{e9}", "stored in NFC");
    assert_eq!(e.api().status(&format!("/projects/{}", enc(cafe))), 200);
    assert_eq!(
        e.api().status(&format!("/projects/{}", enc("caf\u{e9}"))),
        200
    );
}
