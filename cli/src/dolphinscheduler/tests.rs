use super::tasks;
use super::*;
use shoal_common::definition::WorkflowDef;

const WAREHOUSE: &str =
    include_str!("../../../tests/fixtures/dolphinscheduler/warehouse_daily.json");
const OTHERS: &str =
    include_str!("../../../tests/fixtures/dolphinscheduler/child_and_dependency.json");
const WAREHOUSE_33: &str =
    include_str!("../../../tests/fixtures/dolphinscheduler/v3.3/warehouse_daily.json");
const OTHERS_33: &str =
    include_str!("../../../tests/fixtures/dolphinscheduler/v3.3/child_and_dependency.json");

/// Both files as one export (the codes refer across them).
fn both(a: &str, b: &str) -> String {
    let mut all: Vec<serde_json::Value> = serde_json::from_str(a).unwrap();
    all.extend(serde_json::from_str::<Vec<serde_json::Value>>(b).unwrap());
    serde_json::to_string(&all).unwrap()
}

fn options(project: &str) -> Options {
    Options {
        project: project.into(),
        ..Default::default()
    }
}

fn find<'a>(imported: &'a Imported, name: &str) -> &'a ImportedWorkflow {
    imported.workflows.iter().find(|w| w.name == name).unwrap()
}

fn task<'a>(def: &'a WorkflowDef, name: &str) -> &'a shoal_common::definition::TaskDef {
    def.tasks.iter().find(|t| t.name == name).unwrap()
}

#[test]
fn every_supported_type_and_setting_is_carried_over() {
    let imported = convert(&both(WAREHOUSE, OTHERS), &options("etl")).unwrap();
    assert_eq!(imported.workflows.len(), 3);
    let w = find(&imported, "warehouse_daily");
    let def = WorkflowDef::parse(&w.yaml).unwrap();
    assert_eq!(def.project, "etl");
    assert_eq!(def.params["region"], "eu");
    assert_eq!(def.params["dt"], "$[yyyy-MM-dd-1]");
    assert!(
        !def.params.contains_key("warehouse_status"),
        "OUT needs no default"
    );
    assert_eq!(def.failure_strategy.to_string(), "continue");
    assert_eq!(def.priority.to_string(), "high");
    assert_eq!(def.execution_type.to_string(), "serial_wait");
    assert_eq!(def.timeout, Some(std::time::Duration::from_secs(240 * 60)));
    assert_eq!(w.tasks, 13);

    let extract = task(&def, "extract_orders");
    assert_eq!(extract.task_type, "shell");
    assert_eq!(extract.depends_on, ["wait_upstream_ingest"]);
    assert_eq!(extract.params["src_table"], "orders_raw");
    assert_eq!(extract.retries, 3);
    assert_eq!(
        extract.retry_interval,
        Some(std::time::Duration::from_secs(300))
    );
    assert_eq!(extract.timeout, Some(std::time::Duration::from_secs(1800)));
    assert_eq!(
        extract.timeout_strategy,
        shoal_common::definition::TimeoutStrategy::Fail
    );
    assert_eq!(extract.worker_group, "etl");
    assert_eq!(task(&def, "clean_orders").task_type, "python");

    let sql = task(&def, "load_check").sql.as_ref().unwrap();
    assert_eq!(
        (sql.datasource.as_str(), sql.query.as_str()),
        ("postgresql_7", "select 1 as n")
    );
    assert_eq!(
        task(&def, "load_check").task_group.as_deref(),
        Some("ds_task_group_2")
    );
    assert_eq!(task(&def, "load_check").task_group_priority, 5);

    let http = task(&def, "notify_api").http.as_ref().unwrap();
    assert_eq!(http.url, "http://127.0.0.1:0/health?region=${region}");
    assert_eq!(http.headers["X-Run-Date"], "${dt}");
    assert_eq!(http.expected_status, [200]);

    let gate = task(&def, "quality_gate").conditions.as_ref().unwrap();
    assert_eq!(gate.success, ["route_by_region"]);
    assert_eq!(gate.failure, ["alert_quality_failure"]);
    let switch = task(&def, "route_by_region").switch.as_ref().unwrap();
    assert_eq!(switch.cases[0].then, "run_load_child");
    assert_eq!(switch.cases[1].when, "${row_count} > 100");
    assert_eq!(switch.default.as_deref(), Some("skip_region"));
    let child = task(&def, "run_load_child").sub_workflow.as_ref().unwrap();
    assert_eq!(child.workflow, "warehouse_load_child");
    assert_eq!(
        child.params.get("dt").map(String::as_str),
        Some("${dt}"),
        "the child gets the parent's global parameters, as in DolphinScheduler"
    );
    assert_eq!(
        task(&def, "publish_done").delay,
        Some(std::time::Duration::from_secs(60))
    );
    assert!(!task(&def, "debug_dump_env").enabled, "flag NO: skipped");

    let dep = task(&def, "wait_upstream_ingest")
        .dependent
        .as_ref()
        .unwrap();
    let groups = dep.resolved_groups();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].items[0].workflow, "upstream_ingest");
    assert_eq!(groups[0].items[1].task.as_deref(), Some("pull_orders"));
    assert_eq!(groups[1].items[0].date.to_string(), "yesterday");
    assert_eq!(dep.check_interval, Some(std::time::Duration::from_secs(30)));
    assert_eq!(
        dep.on_failure,
        shoal_common::definition::OnDependFailure::Wait
    );
    assert_eq!(dep.timeout, Some(std::time::Duration::from_secs(180 * 60)));

    let schedule = w.schedule.as_ref().unwrap();
    assert_eq!(schedule.cron, "0 30 2 * * ?");
    assert_eq!(schedule.timezone, "Europe/Berlin");
    assert_eq!(schedule.worker_group.as_deref(), Some("etl"));
    assert_eq!(
        schedule.start_time.as_deref(),
        Some("2024-03-12T00:00:00+01:00")
    );
}

#[test]
fn what_shoal_lacks_is_reported_by_name_and_type() {
    // FLINK stands for a type shoal lacks: the fixture's SPARK task, renamed.
    let flink = WAREHOUSE.replace(r#""taskType" : "SPARK""#, r#""taskType" : "FLINK""#);
    let imported = convert(&both(&flink, OTHERS), &options("default")).unwrap();
    let report = imported.report.join("\n");
    for expected in [
        "warehouse_daily: task 'aggregate_big_day' (FLINK): not imported, shoal has no FLINK task",
        "warehouse_daily: task 'load_check' (SQL): datasource 7 (POSTGRESQL) is named 'postgresql_7'",
        "warehouse_daily: task 'load_check' (SQL): 1 preStatements not carried over",
        "warehouse_daily: task 'load_check' (SQL): task group 2 is named 'ds_task_group_2'",
        "warehouse_daily: task 'clean_orders' (PYTHON): not carried over: environment",
        "warehouse_daily: alerts (FAILURE to alert group 1) are not carried over",
    ] {
        assert!(
            report.contains(expected),
            "missing {expected:?} in:\n{report}"
        );
    }
    let yaml = &find(&imported, "warehouse_daily").yaml;
    assert!(
        yaml.contains("project: default"),
        "named even as the default:\n{yaml}"
    );
    // The unsupported task stays in the DAG and fails saying why.
    let def = WorkflowDef::parse(yaml).unwrap();
    let flink = task(&def, "aggregate_big_day");
    assert!(
        flink
            .command
            .as_deref()
            .unwrap()
            .contains("was not imported"),
        "{flink:?}"
    );
    assert_eq!(flink.depends_on, ["route_by_region"]);
}

#[test]
fn spark_jupyter_and_k8s_tasks_become_spark_notebook_and_kubernetes_tasks() {
    let imported = convert(&both(WAREHOUSE, OTHERS), &options("default")).unwrap();
    let report = imported.report.join("\n");
    let def = WorkflowDef::parse(&find(&imported, "warehouse_daily").yaml).unwrap();
    let t = task(&def, "aggregate_big_day");
    assert_eq!(t.task_type, "spark");
    let spark = t.spark.as_ref().unwrap();
    let jar = "file:/dolphinscheduler/etl/resources/jobs/wh-aggregate.jar";
    assert_eq!(
        (spark.main_class.as_deref(), spark.app_jar.as_deref()),
        (Some("com.example.wh.AggregateOrders"), Some(jar))
    );
    assert_eq!(
        (spark.deploy_mode.as_deref(), spark.master()),
        (Some("cluster"), "yarn")
    );
    assert_eq!(spark.driver_memory.as_deref(), Some("512M"));
    assert_eq!(spark.executor_memory.as_deref(), Some("2G"));
    assert_eq!(
        (
            spark.driver_cores,
            spark.executor_cores,
            spark.num_executors
        ),
        (Some(1), Some(2), Some(2))
    );
    assert_eq!(spark.args, ["--dt", "${dt}"]);
    assert_eq!(spark.name.as_deref(), Some("aggregate_big_day"));
    assert!(
        report.contains(&format!("(SPARK): '{jar}' is a DolphinScheduler resource")),
        "{report}"
    );

    // The other program types and options, and a JUPYTER task, on the same task.
    let with = |task_type: &str, params: &str| {
        let original = r#""taskType" : "SPARK""#;
        let at = WAREHOUSE.find(original).unwrap();
        let params_at = at + WAREHOUSE[at..].find(r#""taskParams" : "#).unwrap();
        let params_end = params_at + WAREHOUSE[params_at..].find('\n').unwrap();
        let mut text = WAREHOUSE.to_string();
        text.replace_range(
            params_at..params_end,
            &format!(r#""taskParams" : {params},"#),
        );
        let text = text.replacen(original, &format!(r#""taskType" : "{task_type}""#), 1);
        let imported = convert(&both(&text, OTHERS), &options("default")).unwrap();
        let def = WorkflowDef::parse(&find(&imported, "warehouse_daily").yaml).unwrap();
        (
            task(&def, "aggregate_big_day").clone(),
            imported.report.join("\n"),
        )
    };
    let (t, report) = with(
        "SPARK",
        r#"{"programType":"PYTHON","mainJar":{"resourceName":"/jobs/agg.py"},"deployMode":"local","mainArgs":"a 'b c'","others":"--conf spark.x=1 --verbose","yarnQueue":"etl","driverCores":0}"#,
    );
    let spark = t.spark.unwrap();
    assert_eq!(spark.py_file.as_deref(), Some("/jobs/agg.py"));
    assert_eq!(
        (spark.master(), spark.deploy_mode.as_deref()),
        ("local", None)
    );
    assert_eq!(spark.args, ["a", "'b", "c'"]);
    assert_eq!(spark.conf["spark.x"], "1");
    assert_eq!(spark.conf["spark.yarn.queue"], "etl");
    assert_eq!(spark.driver_cores, None);
    assert!(
        report.contains("quotes in them are kept as written"),
        "{report}"
    );
    assert!(
        report.contains("options not carried over (only --conf KEY=VALUE is): --verbose"),
        "{report}"
    );
    let (t, report) = with("SPARK", r#"{"programType":"SQL","rawScript":"select 1"}"#);
    assert_eq!(t.task_type, "shell");
    assert!(
        report.contains("(SPARK): not imported: its Spark program type SQL"),
        "{report}"
    );

    let (t, report) = with(
        "JUPYTER",
        r#"{"inputNotePath":"/nb/daily.ipynb","outputNotePath":"/nb/out/daily.ipynb","parameters":"{\"rows\": 10, \"dt\": \"${dt}\", \"full\": true}","kernel":"python3","condaEnvName":"etl","engine":""}"#,
    );
    assert_eq!(t.task_type, "notebook");
    let nb = t.notebook.unwrap();
    assert_eq!(nb.path, "/nb/daily.ipynb");
    assert_eq!(nb.output.as_deref(), Some("/nb/out/daily.ipynb"));
    assert_eq!(nb.kernel.as_deref(), Some("python3"));
    let want = [("dt", "${dt}"), ("full", "True"), ("rows", "10")];
    assert_eq!(
        nb.parameters,
        want.map(|(k, v)| (k.to_string(), v.to_string())).into()
    );
    assert!(
        report.contains("(JUPYTER): not carried over: conda environment 'etl'"),
        "{report}"
    );
    let (t, report) = with(
        "K8S",
        r#"{"image":"ds/etl:1","namespace":"{\"name\":\"batch\",\"cluster\":\"lab\"}","command":"[\"/bin/bash\", \"-c\"]","args":"[\"echo ${dt}\"]","imagePullPolicy":"IfNotPresent","pullSecret":"regcred","minCpuCores":0.5,"minMemorySpace":512,"customizedLabels":[{"label":"team","value":"bi"}],"nodeSelectors":[{"key":"disk","operator":"In","values":"ssd,nvme"}],"datasource":0}"#,
    );
    assert_eq!(t.task_type, "kubernetes");
    let k = t.kubernetes.unwrap();
    assert_eq!(k.namespace(), "batch");
    let pod = k.pod.unwrap();
    assert_eq!(
        pod["containers"][0],
        serde_json::json!({
            "name": "main", "image": "ds/etl:1", "command": ["/bin/bash", "-c"],
            "args": ["echo ${dt}"], "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": {"cpu": "0.5", "memory": "512Mi"}},
        })
    );
    assert_eq!(
        pod["imagePullSecrets"],
        serde_json::json!([{"name": "regcred"}])
    );
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"],
        serde_json::json!([{"key": "disk", "operator": "In", "values": ["ssd", "nvme"]}])
    );
    for want in [
        "(K8S): its cluster 'lab' is not carried over",
        "(K8S): not carried over: its pod labels",
    ] {
        assert!(report.contains(want), "{want}: {report}");
    }
    let (t, report) = with("K8S", r#"{"image":"x","command":"/bin/bash -c"}"#);
    assert_eq!(t.task_type, "shell");
    assert!(
        report.contains("its command '/bin/bash -c' is not a JSON list"),
        "{report}"
    );

    let (t, report) = with("JUPYTER", r#"{"inputNotePath":"daily.ipynb"}"#);
    assert_eq!(t.task_type, "shell");
    assert!(
        report.contains("its notebook 'daily.ipynb' is not an absolute path"),
        "{report}"
    );
}

#[test]
fn the_33_format_reads_the_same() {
    let old = convert(&both(WAREHOUSE, OTHERS), &options("p")).unwrap();
    let new = convert(&both(WAREHOUSE_33, OTHERS_33), &options("p")).unwrap();
    assert_eq!(old.workflows.len(), new.workflows.len());
    for (a, b) in old.workflows.iter().zip(&new.workflows) {
        assert_eq!(a.yaml, b.yaml);
        assert_eq!(a.schedule, b.schedule);
    }
}

#[test]
fn references_outside_the_file_are_reported_and_bad_input_is_refused() {
    let imported = convert(WAREHOUSE, &options("p")).unwrap();
    let report = imported.report.join("\n");
    assert!(
        report.contains("its child workflow (code 13092877811712) is not in the file"),
        "{report}"
    );
    assert!(
        report.contains("workflow code 13092875622400 is left out"),
        "{report}"
    );
    let err = convert("{not json", &options("p")).unwrap_err().to_string();
    assert!(err.contains("not JSON"), "{err}");
    let err = convert(r#"[{"taskDefinitionList": []}]"#, &options("p")).unwrap_err();
    assert!(
        format!("{err:#}").contains("not a DolphinScheduler 3.x workflow export"),
        "{err:#}"
    );
}

#[test]
fn date_values_map_to_cycles() {
    use dependent::date_cycle;
    for (ds, shoal) in [
        ("currentHour", "current_hour"),
        ("last1Hour", "last_hour"),
        ("last3Hours", "last_3_hours"),
        ("today", "today"),
        ("last1Days", "yesterday"),
        ("last7Days", "last_7_days"),
        ("thisWeek", "this_week"),
        ("lastWeek", "last_week"),
        ("lastFriday", "last_friday"),
        ("thisMonth", "this_month"),
        ("thisMonthBegin", "this_month_begin"),
        ("lastMonthEnd", "last_month_end"),
    ] {
        assert_eq!(
            date_cycle(ds).map(|c| c.to_string()).as_deref(),
            Some(shoal),
            "{ds}"
        );
    }
    assert_eq!(date_cycle("nextYear"), None);
}

#[test]
fn names_stay_unique_and_query_values_are_encoded() {
    let mut names = Names::default();
    let given: Vec<String> = [
        "x",
        "x",
        "x_2",
        "daily load",
        "日报",
        "日报",
        "-a/b",
        "cafe\u{301}",
    ]
    .iter()
    .map(|n| names.unique(n))
    .collect();
    assert_eq!(
        given,
        [
            "x",
            "x_2",
            "x_2_2",
            "daily_load",
            "日报",
            "日报_2",
            "_-a_b",
            "caf\u{e9}"
        ]
    );
    assert_eq!(tasks::url_encoded("a b&c=${dt}#"), "a%20b%26c%3D${dt}%23");
}

/// DolphinScheduler's own names, as its users write them in Chinese, are kept; a name
/// shoal cannot hold (a space, `/`) gets `_` there, and the report says so.
#[test]
fn chinese_names_are_kept_as_written() {
    let mut all: Vec<serde_json::Value> = serde_json::from_str(OTHERS).unwrap();
    let renames = [
        ("warehouse_load_child", "条件节点测试工作流"),
        ("load_fact_orders", "前置sql节点"),
        ("refresh_marts", "刷新 数据/集市"),
        ("upstream_ingest", "多sql节点流程"),
        ("pull_orders", "拉取订单"),
    ];
    for w in &mut all {
        let rename = |v: &mut serde_json::Value| {
            if let Some((_, to)) = renames.iter().find(|(from, _)| v == from) {
                *v = serde_json::Value::from(*to);
            }
        };
        rename(&mut w["processDefinition"]["name"]);
        for t in w["taskDefinitionList"].as_array_mut().unwrap() {
            rename(&mut t["name"]);
        }
    }
    let imported = convert(&serde_json::to_string(&all).unwrap(), &options("数据仓库")).unwrap();
    let child = find(&imported, "条件节点测试工作流");
    let def = WorkflowDef::parse(&child.yaml).unwrap();
    assert_eq!(def.project, "数据仓库");
    assert_eq!(task(&def, "刷新_数据_集市").depends_on, ["前置sql节点"]);
    let ingest = WorkflowDef::parse(&find(&imported, "多sql节点流程").yaml).unwrap();
    assert_eq!(
        task(&ingest, "ingest_done").depends_on,
        ["拉取订单", "pull_customers"]
    );
    let renamed: Vec<&String> = imported
        .report
        .iter()
        .filter(|l| l.contains("is named"))
        .collect();
    assert_eq!(
        renamed,
        ["条件节点测试工作流: task '刷新 数据/集市' is named '刷新_数据_集市'"],
        "{:#?}",
        imported.report
    );
    // The YAML keeps the characters themselves, not escapes.
    assert!(
        child.yaml.contains("name: 条件节点测试工作流"),
        "{}",
        child.yaml
    );
}

#[test]
fn an_environment_whose_config_is_given_is_carried_over_and_named_by_its_task() {
    const CODE: i64 = 13092870001024;
    let listed = serde_json::json!({
        "code": 0,
        "data": [
            {"id": 1, "code": CODE, "name": "python 3 环境", "config": "export PYTHONPATH=/opt/etl\nsource /opt/venv/bin/activate", "description": "etl venv"},
            {"id": 2, "code": 99, "name": "unused", "config": "export X=1"},
        ],
    });
    let given = Options {
        environments: environments(&listed.to_string()).unwrap(),
        ..options("default")
    };
    let imported = convert(&both(WAREHOUSE, OTHERS), &given).unwrap();
    assert_eq!(
        imported.environments,
        [ImportedEnvironment {
            name: "python_3_环境".into(),
            config: "export PYTHONPATH=/opt/etl\nsource /opt/venv/bin/activate".into(),
            description: "etl venv".into(),
        }],
        "only the environments the tasks use, named as shoal names may be"
    );
    let report = imported.report.join("\n");
    assert!(
        report.contains("environment 'python 3 环境' is named 'python_3_环境'"),
        "{report}"
    );
    assert!(
        !report.contains("not carried over: environment"),
        "{report}"
    );
    let def = WorkflowDef::parse(&find(&imported, "warehouse_daily").yaml).unwrap();
    assert_eq!(
        task(&def, "clean_orders").environment.as_deref(),
        Some("python_3_环境")
    );

    // The same environment among the export's own items.
    let mut all: Vec<serde_json::Value> = serde_json::from_str(&both(WAREHOUSE, OTHERS)).unwrap();
    all.push(listed["data"][0].clone());
    let imported = convert(&serde_json::to_string(&all).unwrap(), &options("default")).unwrap();
    assert_eq!(imported.environments.len(), 1);
    assert_eq!(imported.workflows.len(), 3);

    // Without it, reported with how to bring it.
    let imported = convert(&both(WAREHOUSE, OTHERS), &options("default")).unwrap();
    assert!(imported.environments.is_empty());
    let report = imported.report.join("\n");
    assert!(
        report.contains(&format!(
            "(PYTHON): not carried over: environment {CODE} (the export does not carry its config: pass DolphinScheduler's environment list with --environments FILE)"
        )),
        "{report}"
    );
}
