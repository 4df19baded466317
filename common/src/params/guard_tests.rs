//! Outside values in shell, python and SQL texts: each injection runs nothing and the
//! script sees the exact value (shell scripts run by a real bash).

use super::*;
use chrono::NaiveDate;
use std::process::Command;

/// Values that would run `touch` (or break out of their quotes) if pasted.
const HOSTILE: &[&str] = &[
    "$(touch pwned)",
    "`touch pwned`",
    "; touch pwned",
    "x && touch pwned #",
    "a'b\"c $HOME ${HOME} \\ * ?",
    "two  spaces\tand tab",
    "new\nline; touch pwned",
    "'; touch pwned; echo '",
    "\"; touch pwned; echo \"",
    "$'\\x41'",
    ")) ; touch pwned ; ((",
    "EOF\ntouch pwned",
];

fn ctx(params: &BTreeMap<String, String>) -> Context<'_> {
    Context {
        params,
        schedule_time: NaiveDate::from_ymd_opt(2026, 3, 31)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap(),
    }
}

/// Expands `text` with `v` (and `dt`) given at start, as a `lang` text.
fn guarded(text: &str, v: &str, lang: Lang) -> (Result<String, ExpandError>, Params) {
    let params = BTreeMap::from([
        ("v".to_string(), v.to_string()),
        ("dt".to_string(), "2026-03-30".to_string()),
        ("own".to_string(), "a b".to_string()),
    ]);
    let outside = Outside::from([
        ("v".to_string(), Source::Start),
        ("dt".to_string(), Source::Start),
    ]);
    let (env, names) = environment(&params, &outside);
    let guard = Guard {
        lang,
        outside: &outside,
        env: &names,
    };
    (expand_guarded(text, &ctx(&params), &guard), env)
}

type Params = BTreeMap<String, String>;

/// Runs `script` with bash in a fresh directory with `env`; its stdout, and whether
/// `pwned` was created.
fn bash(script: &str, env: &Params) -> (String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(env)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    (stdout, dir.path().join("pwned").exists())
}

#[test]
fn a_hostile_value_runs_nothing_in_a_shell_and_the_script_sees_it_exactly() {
    // (template, what it prints for the value v)
    type Printed = fn(&str) -> String;
    let cases: &[(&str, Printed)] = &[
        ("printf '<%s>' ${v}", |v| format!("<{v}>")),
        ("printf '<%s>' \"${v}\"", |v| format!("<{v}>")),
        ("printf '<%s>' \"a ${v} b\"", |v| format!("<a {v} b>")),
        ("printf '<%s>' '${v}'", |v| format!("<{v}>")),
        ("printf '<%s>' 'it''s ${v}'", |v| format!("<its {v}>")),
        ("printf '<%s>' $'tab\\t${v}'", |v| format!("<tab\t{v}>")),
        ("printf '<%s>' \"$(printf '%s' ${v})\"", |v| {
            format!("<{}>", v.trim_end_matches('\n'))
        }),
        ("printf '<%s>' `printf '%s' ${v}`", |v| {
            // Backticks split the unquoted result: the words, joined by printf.
            v.split_whitespace().map(|w| format!("<{w}>")).collect()
        }),
        ("cat <<EOF\n<${v}>\nEOF", |v| format!("<{v}>\n")),
        ("cat <<-EOF\n\t<${v}>\n\tEOF", |v| format!("<{v}>\n")),
        ("cat <<'EOF'\n$(x)\nEOF\nprintf '<%s>' ${v}", |v| {
            format!("$(x)\n<{v}>")
        }),
        ("# don't ${v}\nprintf '<%s>' ${v}", |v| format!("<{v}>")),
        ("x=${v}; printf '<%s>' \"$x\"", |v| format!("<{v}>")),
    ];
    for (template, want) in cases {
        for value in HOSTILE {
            let (script, env) = guarded(template, value, Lang::Shell);
            let script = script.unwrap_or_else(|e| panic!("{template:?} with {value:?}: {e}"));
            let (stdout, pwned) = bash(&script, &env);
            assert!(
                !pwned,
                "{template:?} with {value:?} ran a command: {script}"
            );
            // Backticks and $(...) drop the trailing newlines of what they print; the
            // split case prints nothing for an empty value.
            if !(template.contains('`') && value.trim().is_empty()) {
                assert_eq!(stdout, want(value), "{template:?} with {value:?}: {script}");
            }
        }
    }
}

#[test]
fn a_plain_value_from_outside_is_pasted_as_in_dolphinscheduler() {
    for value in [
        "2026-03-30",
        "20260330",
        "10:20:30",
        "a.csv",
        "张三",
        "ids=1,2,3",
        "50%",
    ] {
        let (script, env) = guarded("echo ${v} '${v}' x${v}", value, Lang::Shell);
        let script = script.unwrap();
        assert_eq!(script, format!("echo {value} '{value}' x{value}"));
        assert_eq!(bash(&script, &env).0, format!("{value} {value} x{value}\n"));
    }
    // A definition's own value is pasted whatever it holds.
    let (script, _) = guarded("echo ${own}", "x", Lang::Shell);
    assert_eq!(script.unwrap(), "echo a b");
}

#[test]
fn a_value_in_shell_arithmetic_must_be_plain() {
    for template in [
        "echo $(( ${v} + 1 ))",
        "(( n = ${v} ))",
        "echo \"$(( (2) * ${v} ))\"",
    ] {
        let (got, _) = guarded(template, "a[$(touch pwned)]", Lang::Shell);
        let e = got.unwrap_err().to_string();
        assert!(
            e.contains("${v} comes from a start parameter") && e.contains("(( ))"),
            "{e}"
        );
        let (script, env) = guarded(template, "41", Lang::Shell);
        assert!(!bash(&script.unwrap(), &env).1);
    }
    // A quoted here-document expands nothing: no variable can stand there.
    let (got, _) = guarded("cat <<'EOF'\n${v}\nEOF", "a b", Lang::Shell);
    let e = got.unwrap_err().to_string();
    assert!(
        e.contains("quoted here-document") && e.contains("$SHOAL_PARAM_v"),
        "{e}"
    );
    // After the arithmetic closes, a value is a word again.
    let (script, env) = guarded("echo $((1+1)) ${v}", "a b", Lang::Shell);
    assert_eq!(bash(&script.unwrap(), &env).0, "2 a b\n");
}

#[test]
fn python_refuses_a_value_that_is_not_plain_and_says_how_to_read_it() {
    let (got, _) = guarded(
        "print('${v}')",
        "'); import os; os.system('id'); ('",
        Lang::Python,
    );
    assert_eq!(
        got.unwrap_err().to_string(),
        "parameter ${v} comes from a start parameter and holds characters other than \
         letters, digits and _-.,:/@+=%, so it is not pasted into python code: read it raw \
         with os.environ[\"SHOAL_PARAM_v\"]"
    );
    let (got, _) = guarded("print('${dt}', '${own}')", "", Lang::Python);
    assert_eq!(got.unwrap(), "print('2026-03-30', 'a b')");
}

#[test]
fn sql_escapes_a_value_in_a_literal_and_refuses_one_outside() {
    let sql = |text: &str, v: &str| guarded(text, v, Lang::Sql).0.map_err(|e| e.to_string());
    assert_eq!(
        sql("select '${v}'", "x'; drop table t; --").unwrap(),
        "select 'x''; drop table t; --'"
    );
    assert_eq!(sql("select \"${v}\"", "a\"b").unwrap(), "select \"a\"\"b\"");
    assert_eq!(
        sql("select * from t_${v} where n = ${v}", "42").unwrap(),
        "select * from t_42 where n = 42"
    );
    for (text, value) in [
        ("select ${v}", "1; drop table t"),
        ("select ${v}", "1--"),
        ("select ${v}", "1 or 1=1"),
        ("select 1 -- it's\n, ${v}", "x'y"),
        ("select /* it's */ ${v}", "x y"),
        ("select $$it's$$, ${v}", "x y"),
        ("select $tag$ ${v} $tag$", "$tag$; drop table t; --"),
        ("select $${v}", "tag"),
    ] {
        let e = sql(text, value).unwrap_err();
        assert!(
            e.contains("outside a quoted SQL literal"),
            "{text:?} with {value:?}: {e}"
        );
    }
    for text in ["select '${v}'", "select E'${v}'", "select E'\\${v}'"] {
        let e = sql(text, "\\'; drop table t; --").unwrap_err();
        assert!(e.contains("backslash"), "{text:?}: {e}");
    }
    // An E-string's escaped quote does not end it.
    assert_eq!(
        sql("select E'\\'${v}'", "a'b").unwrap(),
        "select E'\\'a''b'"
    );
}

/// The master expands a query before it knows the server: a value goes into a literal
/// only where Postgres and MySQL both see one.
#[test]
fn sql_puts_a_value_in_a_literal_only_where_mysql_and_postgres_both_see_it() {
    let sql = |text: &str, v: &str| guarded(text, v, Lang::Sql).0.map_err(|e| e.to_string());
    for text in [
        // MySQL: `\'` is a quote in the literal, so the third quote closes it.
        "select 'a\\'' as q, '${v}'",
        "select 'a\\'' as q, ${v}",
        "select \"a\\\"\" as q, ${v}",
        // MySQL: `#` starts a comment, and the quote in it opens nothing.
        "# don't\nselect ${v}",
        // MySQL: `--` without a space is two minus signs; `/*!` is code.
        "select 1--'\n, '${v}'",
        "select 1 /*! , 'x */ , '${v}'",
        "select 1 /*M! , 'x */ , '${v}'",
    ] {
        let e = sql(text, "1 or 1=1").unwrap_err();
        assert!(e.contains("for MySQL or for Postgres"), "{text:?}: {e}");
    }
    // Where they agree, a value still goes into its literal.
    for (text, want) in [
        ("-- it's\nselect '${v}'", "-- it's\nselect 'a''b'"),
        ("select 'a\\\\', '${v}'", "select 'a\\\\', 'a''b'"),
        ("select '${v}' # it's", "select 'a''b' # it's"),
        ("select `it's`, '${v}'", "select `it's`, 'a''b'"),
        ("/* it's */ select '${v}'", "/* it's */ select 'a''b'"),
        (
            "select 1 /*!50000 , 'x' */, '${v}'",
            "select 1 /*!50000 , 'x' */, 'a''b'",
        ),
    ] {
        assert_eq!(sql(text, "a'b").unwrap(), want, "{text:?}");
    }
    // A number or a name goes anywhere.
    assert_eq!(
        sql("# don't\nselect ${v}", "42").unwrap(),
        "# don't\nselect 42"
    );
}

#[test]
fn every_value_is_in_the_environment_an_outside_one_never_under_a_system_name() {
    let values = BTreeMap::from(
        [
            ("dt", "1"),
            ("PATH", "/tmp"),
            ("BASH_ENV", "/tmp/x"),
            ("http_proxy", "http://evil"),
            ("JAVA_HOME", "/opt/jdk"),
            ("system.biz.date", "20260330"),
            ("a.b", "dotted"),
            ("a_b", "underscored"),
            ("secret.db", "pw"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let outside: Outside = [
        ("dt", Source::Start),
        ("PATH", Source::Start),
        ("BASH_ENV", Source::Output),
        ("http_proxy", Source::Start),
        ("secret.db", Source::Secret),
    ]
    .into_iter()
    .map(|(k, s)| (k.to_string(), s))
    .collect();
    let (env, names) = environment(&values, &outside);
    let get = |k: &str| env.get(k).map(String::as_str);
    assert_eq!(get("dt"), Some("1"));
    assert_eq!(get("SHOAL_PARAM_dt"), Some("1"));
    assert_eq!(get("PATH"), None, "an outside value never sets PATH");
    assert_eq!(get("BASH_ENV"), None);
    assert_eq!(get("http_proxy"), None);
    assert_eq!(get("SHOAL_PARAM_PATH"), Some("/tmp"));
    assert_eq!(
        get("JAVA_HOME"),
        Some("/opt/jdk"),
        "the definition's own names stay"
    );
    assert_eq!(get("SHOAL_PARAM_system_biz_date"), Some("20260330"));
    assert_eq!(get("SHOAL_SECRET_db"), Some("pw"));
    assert_eq!(
        get("SHOAL_PARAM_a_b"),
        Some("underscored"),
        "the identifier wins"
    );
    assert_eq!(names.get("a.b"), None, "a.b has no variable of its own");
    assert_eq!(env_name("secret.db"), "SHOAL_SECRET_db");
}

#[test]
fn in_kubernetes_text_an_outside_dollar_is_doubled_and_the_definition_s_kept() {
    let (out, _) = guarded("$(OWN) ${v} ${own}", "$(DB_PASSWORD) $$", Lang::KubeText);
    assert_eq!(out.unwrap(), "$(OWN) $$(DB_PASSWORD) $$$$ a b");
}
