//! Values from outside a definition are data (docs/security.md, "Values are data"), over the
//! real `shoal standalone`: a start parameter, a completion's and a callback's outputs, an
//! upstream output and a secret that hold shell code run nothing and reach the script
//! exactly; a plain `${dt}` is still pasted; a python task refuses such a value; a quote in
//! a SQL literal cannot end it; a child run does not see its parent's start parameters.

#[path = "support/callback_server.rs"]
mod callback_server;
mod support;

use callback_server::CallbackServer;
use serde_json::json;
use support::{Env, Standalone, attempts, set_secret, wait_for};

/// Each would create the file `pwned` in the task's working directory if it ran.
const HOSTILE: [&str; 4] = [
    "$(touch pwned)",
    "`touch pwned`",
    "; touch pwned",
    "a'b\" $HOME * && touch pwned",
];

fn standalone() -> Env {
    Env::Standalone(Standalone::start())
}

/// What a task wrote to the file `name` of the test's directory.
fn written(e: &Env, name: &str) -> String {
    std::fs::read_to_string(e.path(name)).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// A shell command that writes `${param}` as the task sees it, bare, into file `name`
/// (and files `name.q`, `name.sq` from double and single quotes), then fails if anything
/// created `pwned` in its working directory.
fn writes(e: &Env, param: &str, name: &str) -> String {
    let f = e.path(name);
    let f = f.display();
    format!(
        "printf '%s' ${{{param}}} > {f}; printf '%s' \"${{{param}}}\" > {f}.q; \
         printf '%s' '${{{param}}}' > {f}.sq; test ! -e pwned"
    )
}

fn assert_written(e: &Env, name: &str, value: &str) {
    for file in [name.to_string(), format!("{name}.q"), format!("{name}.sq")] {
        assert_eq!(written(e, &file), value, "{file}");
    }
}

#[test]
fn start_parameters_are_data_in_a_shell_task_and_a_plain_one_is_pasted() {
    let e = standalone();
    let tasks: Vec<String> = (0..HOSTILE.len())
        .map(|i| {
            format!(
                "  - {{ name: t{i}, type: shell, command: {:?} }}",
                writes(&e, &format!("p{i}"), &format!("p{i}"))
            )
        })
        .collect();
    // A quoted here-document expands nothing: `${dt}` shows there only if it was pasted.
    let pasted = e.path("pasted");
    e.apply(&format!(
        "name: starts\nparams: {{ dt: x, who: y, p0: x, p1: x, p2: x, p3: x }}\ntasks:\n{}\n  - {{ name: dt, type: shell, command: {:?} }}\n",
        tasks.join("\n"),
        format!("cat > {} <<'EOF'\n${{dt}} ${{who}}\nEOF", pasted.display()),
    ));
    let mut params = serde_json::Map::new();
    for (i, value) in HOSTILE.iter().enumerate() {
        params.insert(format!("p{i}"), json!(value));
    }
    params.insert("dt".into(), json!("2026-03-30"));
    params.insert("who".into(), json!("张三"));
    let id = e.start("starts", &json!({ "params": params }).to_string());
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    for (i, value) in HOSTILE.iter().enumerate() {
        assert_written(&e, &format!("p{i}"), value);
    }
    assert_eq!(written(&e, "pasted"), "2026-03-30 张三\n");
}

#[test]
fn outputs_of_a_completion_a_callback_and_an_upstream_task_are_data() {
    let e = standalone();
    let value = "$(touch pwned)`touch pwned`; touch pwned";
    let answering = CallbackServer::start(Some(json!({"outputs": {"frames": value}})));
    e.apply(&format!(
        r#"
name: outputs
failure_strategy: continue
tasks:
  - {{ name: approve, type: wait }}
  - {{ name: ask, type: callback, callback: {{ url: "{url}" }} }}
  - {{ name: print, type: shell, command: "echo '${{setValue(printed={value})}}'" }}
  - {{ name: use_completion, type: shell, depends_on: [approve], command: {c:?} }}
  - {{ name: use_callback, type: shell, depends_on: [ask], command: {b:?} }}
  - {{ name: use_output, type: shell, depends_on: [print], command: {o:?} }}
"#,
        url = answering.url,
        c = writes(&e, "who", "completion"),
        b = writes(&e, "frames", "callback"),
        o = writes(&e, "printed", "upstream"),
    ));
    let id = e.start("outputs", "{}");
    let approve = wait_for("approve to wait", support::LONG, || {
        let inst = e.api().get(&format!("/instances/{id}"));
        let t = attempts(&inst, "approve").into_iter().next()?.clone();
        (t["state"] == "waiting").then(|| t["id"].as_i64().unwrap())
    });
    let (status, body) = e.api().post(
        &format!("/task-instances/{approve}/complete"),
        &json!({"outputs": {"who": value}}).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(answering.requests().len(), 1, "asked once");
    for name in ["completion", "callback", "upstream"] {
        assert_written(&e, name, value);
    }
}

#[test]
fn a_secret_with_backticks_and_a_dollar_is_data_and_stays_masked() {
    let e = standalone();
    let value = "pw`touch pwned`$HOME$(touch pwned)";
    set_secret(&e, "tricky", value);
    let f = e.path("secret");
    e.apply(&format!(
        "name: uses_secret\ntasks:\n- {{ name: t, type: shell, command: {:?} }}\n",
        format!(
            "printf '%s' ${{secret.tricky}} > {f}; echo \"key=${{secret.tricky}}\"; test ! -e pwned",
            f = f.display()
        )
    ));
    let inst = e.end(e.start("uses_secret", "{}"));
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(written(&e, "secret"), value);
    let t = attempts(&inst, "t")[0]["id"].as_i64().unwrap();
    let (_, log) = e.api().log(t);
    assert!(log.contains("key=***") && !log.contains(value), "{log}");
}

#[test]
fn python_refuses_a_value_that_is_not_plain_and_sql_keeps_a_quote_in_its_literal() {
    let e = standalone();
    let f = e.path("got");
    e.apply(&format!(
        r#"
name: langs
params: {{ name: n }}
failure_strategy: continue
tasks:
  - {{ name: py, type: python, script: "print('${{name}}')" }}
  - name: q
    type: sql
    sql:
      datasource: pg
      output: first_row
      query: "create temp table t (v text); insert into t values ('${{name}}'); select v as got, count(*) over () as n from t"
  - {{ name: show, type: shell, depends_on: [q], command: "printf '%s %s' \"${{got}}\" ${{n}} > {f}" }}
  - {{ name: bare, type: sql, sql: {{ datasource: pg, query: "select ${{name}}" }} }}
"#,
        f = f.display()
    ));
    let name = "x'); drop table t; select ('";
    let body = json!({"params": {"name": name}}).to_string();
    let inst = e.end(e.start("langs", &body));
    let py = attempts(&inst, "py")[0];
    assert_eq!(py["state"], "failure");
    let message = py["message"].as_str().unwrap();
    assert!(
        message.contains("${name} comes from a start parameter")
            && message.contains("os.environ[\"SHOAL_PARAM_name\"]"),
        "{message}"
    );
    assert_eq!(
        written(&e, "got"),
        format!("{name} 1"),
        "the quote stayed in the literal"
    );
    let bare = attempts(&inst, "bare")[0];
    assert_eq!(bare["state"], "failure");
    let message = bare["message"].as_str().unwrap();
    assert!(
        message.contains("outside a quoted SQL literal"),
        "{message}"
    );

    // A plain value is pasted into python as before.
    let inst = e.end(e.start("langs", r#"{"params": {"name": "ann"}}"#));
    assert_eq!(attempts(&inst, "py")[0]["state"], "success", "{inst}");
}

/// On MySQL (a project's datasource secret) too: a quote stays in its literal, and after a
/// `\'` in the query, which MySQL reads unlike Postgres, a value is refused rather than
/// run as code.
#[test]
fn sql_on_mysql_keeps_a_quote_in_its_literal_and_a_value_out_of_its_code() {
    let e = standalone();
    let db = shoal_testkit::TestMysqlDb::create("shoal_values");
    set_secret(&e, "shop", &db.url);
    e.apply(
        r#"
name: on_mysql
params: { name: n }
failure_strategy: continue
tasks:
  - name: q
    type: sql
    sql:
      datasource: shop
      output: first_row
      query: "create table t (v text); insert into t values ('${name}'); select v as got, (select count(*) from t) as n from t"
  - { name: esc, type: sql, sql: { datasource: shop, query: "select 'a\\'' as q, ${name}" } }
"#,
    );
    let name = "x'); drop table t; select ('";
    let body = json!({"params": {"name": name}}).to_string();
    let inst = e.end(e.start("on_mysql", &body));
    let q = attempts(&inst, "q")[0];
    assert_eq!(q["state"], "success", "{inst}");
    let id = q["id"].as_i64().unwrap();
    let (_, log) = e.api().log(id);
    assert!(log.contains("1 rows returned"), "{log}");
    assert_eq!(q["output"]["got"], name, "{q}");
    assert_eq!(q["output"]["n"], "1", "{q}");
    let esc = attempts(&inst, "esc")[0];
    assert_eq!(esc["state"], "failure");
    let message = esc["message"].as_str().unwrap();
    assert!(message.contains("for MySQL or for Postgres"), "{message}");
}

#[test]
fn a_child_run_sees_only_the_params_its_parent_task_passes() {
    let e = standalone();
    let f = e.path("child");
    e.apply(&format!(
        "name: child\nparams: {{ mode: own, passed: unset }}\ntasks:\n- {{ name: t, type: shell, command: \"echo ${{mode}} ${{passed}} >> {f}\" }}\n",
        f = f.display()
    ));
    e.apply(
        r#"
name: parent
tasks:
  - { name: run, type: sub_workflow, sub_workflow: { workflow: child, params: { passed: "${region}" } } }
  - { name: each, type: foreach, foreach: { items: "[1]", workflow: child, params: { passed: "${region}" } } }
"#,
    );
    let body = json!({"params": {"mode": "injected", "region": "eu"}}).to_string();
    let inst = e.end(e.start("parent", &body));
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(
        support::lines(&f),
        ["own eu", "own eu"],
        "the parent's start parameter `mode` did not reach the children"
    );
}
