use super::*;
use chrono::NaiveDate;

fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn at(y: i32, m: u32, d: u32, hh: u32, mm: u32, ss: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(y, m, d)
        .unwrap()
        .and_hms_opt(hh, mm, ss)
        .unwrap()
}

/// Tuesday, the last day of a 31-day month.
fn schedule() -> NaiveDateTime {
    at(2026, 3, 31, 10, 20, 30)
}

fn eval_at(expr: &str, t: NaiveDateTime) -> Result<String, ExpandError> {
    let p = BTreeMap::new();
    expand(
        &format!("$[{expr}]"),
        &Context {
            params: &p,
            schedule_time: t,
        },
    )
}

fn check_table(t: NaiveDateTime, table: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (expr, want) in table {
        match eval_at(expr, t) {
            Ok(got) if got == *want => {}
            got => failures.push(format!("$[{expr}]: want {want}, got {got:?}")),
        }
    }
    assert!(failures.is_empty(), "at {t}:\n{}", failures.join("\n"));
}

#[test]
fn time_expressions() {
    check_table(
        schedule(),
        &[
            // Formats alone.
            ("yyyyMMdd", "20260331"),
            ("yyyy-MM-dd", "2026-03-31"),
            ("HHmmss", "102030"),
            ("yyyyMMddHHmmss", "20260331102030"),
            ("yyyy-MM-dd HH:mm:ss", "2026-03-31 10:20:30"),
            (" yyyyMMdd ", "20260331"),
            ("yyyy/MM", "2026/03"),
            ("yy.M.d", "26.3.31"),
            ("yyyyMM", "202603"),
            ("yyyy", "2026"),
            ("MMM EEE EEEE MMMM", "Mar Tue Tuesday March"),
            ("hh a", "10 AM"),
            ("D u SSS", "90 2 000"),
            ("yyyy'T'HH", "2026T10"),
            ("yyyy'年'MM'月'", "2026年03月"),
            ("yyyy''MM", "2026'03"),
            // Days.
            ("yyyyMMdd-1", "20260330"),
            ("yyyyMMdd+1", "20260401"),
            ("yyyyMMdd+7", "20260407"),
            ("yyyy-MM-dd-1", "2026-03-30"),
            ("yyyy-MM-dd+31", "2026-05-01"),
            ("yyyyMMdd-7*2", "20260317"),
            ("yyyyMMdd-31", "20260228"),
            ("yyyy-MM-dd HH:mm:ss-1", "2026-03-30 10:20:30"),
            // Hours and minutes.
            ("HHmmss+1/24", "112030"),
            ("HHmmss-1/24", "092030"),
            ("yyyyMMddHHmmss-1/24", "20260331092030"),
            ("yyyyMMddHH+14/24", "2026040100"),
            ("yyyyMMddHH-11/24", "2026033023"),
            ("HHmmss-1/24/60", "101930"),
            ("HH:mm+30/24/60", "10:50"),
            ("yyyy-MM-dd HH:mm:ss-90/24/60", "2026-03-31 08:50:30"),
            ("HHmmss+1/2", "222030"),
            // Months: the 31st clamps.
            ("add_months(yyyyMMdd,-1)", "20260228"),
            ("add_months(yyyyMMdd,1)", "20260430"),
            ("add_months(yyyyMMdd,0)", "20260331"),
            ("add_months(yyyy-MM-dd,12*2)", "2028-03-31"),
            ("add_months(yyyyMMdd,-13)", "20250228"),
            ("add_months(yyyyMMdd, -12)", "20250331"),
            ("add_months(yyyy-MM-dd HH:mm,1)", "2026-04-30 10:20"),
            // Business days.
            ("this_day(yyyy-MM-dd)", "2026-03-31"),
            ("last_day(yyyy-MM-dd)", "2026-03-30"),
            ("last_day(yyyyMMdd)", "20260330"),
            ("month_first_day(yyyyMMdd,-1)", "20260201"),
            ("month_first_day(yyyy-MM-dd,0)", "2026-03-01"),
            ("month_first_day(yyyy-MM-dd)", "2026-03-01"),
            ("month_first_day(yyyyMMdd,10)", "20270101"),
            ("month_last_day(yyyyMMdd,-1)", "20260228"),
            ("month_last_day(yyyyMMdd,0)", "20260331"),
            ("month_last_day(yyyy-MM-dd)", "2026-03-31"),
            ("month_last_day(yyyyMMdd,1)", "20260430"),
            ("month_last_day(yyyyMMdd,11)", "20270228"),
            ("month_last_day(yyyyMMdd,-25)", "20240229"),
            ("week_first_day(yyyyMMdd,0)", "20260330"),
            ("week_first_day(yyyy-MM-dd)", "2026-03-30"),
            ("week_first_day(yyyyMMdd,-1)", "20260323"),
            ("week_first_day(yyyyMMdd,1)", "20260406"),
            ("week_last_day(yyyyMMdd,0)", "20260405"),
            ("week_last_day(yyyyMMdd,-1)", "20260329"),
            ("year_week(yyyy-MM-dd)", "2026-14"),
            ("year_week(yyyyMMdd)", "202614"),
            ("year_week(yyyy-MM-dd,1)", "2026-14"),
            ("year_week(yyyy-MM-dd,7)", "2026-13"),
            // DolphinScheduler's older day-offset forms.
            ("month_begin(yyyyMMdd,1)", "20260302"),
            ("month_end(yyyyMMdd,-1)", "20260330"),
            ("week_begin(yyyyMMdd,0)", "20260330"),
            ("week_end(yyyyMMdd,1)", "20260406"),
        ],
    );
}

#[test]
fn time_expressions_on_leap_days_and_year_ends() {
    check_table(
        at(2024, 2, 29, 0, 0, 0),
        &[
            ("add_months(yyyyMMdd,12)", "20250228"),
            ("add_months(yyyyMMdd,-12)", "20230228"),
            ("add_months(yyyyMMdd,48)", "20280229"),
            ("yyyyMMdd+1", "20240301"),
            ("yyyyMMddHHmmss-1/24", "20240228230000"),
            ("last_day(yyyyMMdd)", "20240228"),
            ("month_last_day(yyyyMMdd,0)", "20240229"),
            ("month_last_day(yyyyMMdd,12)", "20250228"),
        ],
    );
    check_table(
        at(2024, 1, 31, 12, 0, 0),
        &[("add_months(yyyyMMdd,1)", "20240229")],
    );
    // ISO weeks belong to the year holding their Thursday.
    check_table(
        at(2024, 12, 30, 0, 0, 0),
        &[("year_week(yyyy-MM-dd)", "2025-01")],
    );
    check_table(
        at(2027, 1, 1, 0, 0, 0),
        &[
            ("year_week(yyyyMMdd)", "202653"),
            ("yyyyMMdd-1", "20261231"),
            ("week_first_day(yyyy-MM-dd,0)", "2026-12-28"),
        ],
    );
}

#[test]
fn year_week_matches_iso_for_many_days() {
    let mut d = NaiveDate::from_ymd_opt(2019, 12, 1).unwrap();
    while d < NaiveDate::from_ymd_opt(2031, 2, 1).unwrap() {
        let iso = d.iso_week();
        let want = format!("{:04}-{:02}", iso.year(), iso.week());
        assert_eq!(
            eval_at("year_week(yyyy-MM-dd)", d.and_hms_opt(0, 0, 0).unwrap()).unwrap(),
            want,
            "{d}"
        );
        d = d.succ_opt().unwrap();
    }
}

#[test]
fn builtins_follow_the_schedule_time() {
    let b = builtins(7, 42, schedule());
    assert_eq!(
        b,
        params(&[
            ("system.datetime", "20260331102030"),
            ("system.biz.date", "20260330"),
            ("system.biz.curdate", "20260331"),
            ("system.workflow.instance.id", "7"),
            ("system.task.instance.id", "42"),
        ])
    );
    // The business date crosses month and year boundaries.
    let b = builtins(1, 2, at(2026, 1, 1, 0, 0, 0));
    assert_eq!(b["system.biz.date"], "20251231");
    assert_eq!(b["system.biz.curdate"], "20260101");
    assert_eq!(b["system.datetime"], "20260101000000");
}

#[test]
fn expands_params_builtins_and_times_together() {
    let mut p = builtins(7, 42, schedule());
    p.extend(params(&[("table", "ods.orders")]));
    let ctx = Context {
        params: &p,
        schedule_time: schedule(),
    };
    assert_eq!(
        expand(
            "insert into ${table} partition (dt='${system.biz.date}') select * from src where day = '$[yyyy-MM-dd-1]' -- ${ system.workflow.instance.id }/${system.task.instance.id}",
            &ctx
        )
        .unwrap(),
        "insert into ods.orders partition (dt='20260330') select * from src where day = '2026-03-30' -- 7/42"
    );
}

#[test]
fn time_expressions_inside_param_values_are_evaluated_once() {
    let p = params(&[
        ("dt", "$[yyyyMMdd-1]"),
        (
            "range",
            "from $[month_first_day(yyyy-MM-dd,-1)] to $[month_last_day(yyyy-MM-dd,-1)]",
        ),
        ("ref", "${dt}/$[HH]"),
        ("self", "${self}"),
        ("cost", "$5 and $[yyyy] ${setValue(x=1)}"),
    ]);
    let ctx = Context {
        params: &p,
        schedule_time: schedule(),
    };
    let ex = |t: &str| expand(t, &ctx).unwrap();
    assert_eq!(ex("dt=${dt}"), "dt=20260330");
    assert_eq!(ex("${range}"), "from 2026-02-01 to 2026-02-28");
    // One level: a `${...}` inside a value stays as written, even one naming itself.
    assert_eq!(ex("${ref}"), "${dt}/10");
    assert_eq!(ex("${self}"), "${self}");
    assert_eq!(ex("${cost}"), "$5 and 2026 ${setValue(x=1)}");
}

#[test]
fn leaves_non_placeholders_alone() {
    let p = params(&[("dt", "2026-01-01")]);
    let ctx = Context {
        params: &p,
        schedule_time: schedule(),
    };
    let ex = |t: &str| expand(t, &ctx).unwrap();
    assert_eq!(ex(""), "");
    assert_eq!(ex("no dollars at all"), "no dollars at all");
    assert_eq!(ex("echo '${setValue(x=1)}'"), "echo '${setValue(x=1)}'");
    assert_eq!(
        ex("echo '${ setValue(x=${dt}) }'"),
        "echo '${ setValue(x=2026-01-01) }'",
        "a parameter inside setValue is expanded, as in DolphinScheduler"
    );
    assert_eq!(
        ex("plain $HOME $1 $$ $((1+2)) ${"),
        "plain $HOME $1 $$ $((1+2)) ${"
    );
    assert_eq!(
        ex("unclosed $[yyyy and ${dt}"),
        "unclosed $[yyyy and 2026-01-01"
    );
    assert_eq!(ex("${dt} ${ $dt"), "2026-01-01 ${ $dt");
    assert_eq!(ex("$${dt}$$[yyyy]$"), "$2026-01-01$2026$");
    assert_eq!(ex("${dt}${dt}"), "2026-01-012026-01-01");
    assert_eq!(ex("€${dt}€$[yyyy]€"), "€2026-01-01€2026€");
    // Many unclosed openers stay linear and literal.
    let many = "${ $[".repeat(20_000);
    assert_eq!(ex(&many), many);
}

#[test]
fn undefined_params_are_reported_with_a_fix() {
    let p = params(&[("dt", "x")]);
    let ctx = Context {
        params: &p,
        schedule_time: schedule(),
    };
    let err = expand("echo ${dt} ${ nope }", &ctx).unwrap_err();
    assert_eq!(err, ExpandError::UndefinedParam("nope".into()));
    assert_eq!(
        err.to_string(),
        "undefined parameter ${nope}: define it in the workflow's params, the task's params or pass it at start with --param nope=VALUE (a sub-workflow's run gets only what its parent task passes in its params)"
    );
}

#[test]
fn bad_expressions_name_the_expression_and_the_problem() {
    let cases: &[(&str, &str)] = &[
        ("", "the expression is empty"),
        ("foo", "'f' is not a supported date/time letter"),
        ("yyyyMMdd+x", "'x' is not a supported date/time letter"),
        ("1+2", "has no date/time letters"),
        ("$i+1", "'i' is not a supported date/time letter"),
        ("yyyyMMdd+(1)x", "'x' is not a supported date/time letter"),
        (
            "yyyyMMdd-",
            "nothing after the trailing '-': write e.g. yyyyMMdd-1",
        ),
        ("yyyyMMdd+1/0", "bad offset '1/0': division by zero"),
        ("yyyyMMdd+1)", "bad offset '1)': unexpected ')'"),
        ("yyyyMMdd+99999999999999999999", "number out of range"),
        (
            "yyyyMMdd+999999999",
            "the offset moves the date out of range",
        ),
        ("yyyy'MM", "unterminated quote in the format 'yyyy'MM'"),
        (
            "add_months(yyyyMMdd)",
            "add_months(...) needs 2 arguments: add_months(yyyyMMdd,N)",
        ),
        ("add_months(yyyyMMdd,1,2)", "takes at most 2 arguments"),
        (
            "add_months(,1)",
            "needs a date format as its first argument",
        ),
        ("add_month(yyyyMMdd,1)", "unknown function 'add_month'"),
        (
            "add_months(yyyyMMdd,x)",
            "add_months(...): bad number 'x': expected a number, found 'x'",
        ),
        (
            "add_months(yyyyMMdd,99999999999)",
            "the date moves out of range",
        ),
        (
            "this_day(yyyyMMdd,1)",
            "this_day(...) takes only the date format: this_day(yyyyMMdd)",
        ),
        ("week_first_day(yyyyMMdd,(1)", "missing ')'"),
        ("year_week(yyyy-MM-dd,9)", "1 (Monday) to 7 (Sunday), not 9"),
        ("this_day(qq)", "'qq' is not a supported date/time letter"),
    ];
    let mut failures = Vec::new();
    for (expr, want) in cases {
        match eval_at(expr, schedule()) {
            Err(ExpandError::BadExpression { expr: e, reason })
                if e == *expr && reason.contains(want) => {}
            got => failures.push(format!(
                "$[{expr}]: want reason containing {want:?}, got {got:?}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Hostile nesting is an error, not a stack overflow.
    let deep = format!(
        "add_months(yyyyMMdd,{}1{})",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    let err = eval_at(&deep, schedule()).unwrap_err();
    assert!(err.to_string().contains("nested too deeply"), "{err}");
    let deep = format!("yyyyMMdd+1*{}1", "-".repeat(10_000));
    assert!(eval_at(&deep, schedule()).is_err());

    // The whole message: what, why, and what would work.
    let msg = eval_at("add_month(yyyyMMdd,1)", schedule())
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with(
            "bad time expression $[add_month(yyyyMMdd,1)]: unknown function 'add_month'. Supported forms: $[yyyyMMdd], "
        ),
        "{msg}"
    );
    assert!(msg.contains("$[add_months(yyyyMMdd,-1)]"), "{msg}");

    // Inside a parameter's value: the parameter is named.
    let p = params(&[("dt", "$[yyyMMdd-x]")]);
    let ctx = Context {
        params: &p,
        schedule_time: schedule(),
    };
    match expand("echo ${dt}", &ctx).unwrap_err() {
        ExpandError::BadExpression { expr, reason } => {
            assert_eq!(expr, "yyyMMdd-x");
            assert!(
                reason.ends_with("(in the value of parameter ${dt})"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn references_lists_param_names_once() {
    assert_eq!(
        references(
            "echo ${a} ${ b } $[yyyyMMdd-1] ${a} '${setValue(c=1)}' '${setValue(d=${e})}' $HOME ${"
        ),
        vec!["a".to_string(), "b".to_string(), "e".to_string()]
    );
    assert!(references("no params $[yyyy] $x").is_empty());
    assert!(references("").is_empty());
    // The same reading as expand: `${x}` inside `$[...]` belongs to the time expression.
    assert!(references("$[yyyy${x}]").is_empty());
    assert_eq!(references("${system.biz.date}"), vec!["system.biz.date"]);
}
