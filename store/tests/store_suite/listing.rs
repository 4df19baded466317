//! What the API lists for the web UI: instances a page at a time within a time range,
//! projects, versions and the latest run of each workflow, on both backends.

use super::*;
use std::time::Instant;

/// Claims one instance per `(project, workflow)` start, in order, and returns their ids.
async fn start_all(store: &Store, starts: &[(&str, &str)]) -> Vec<i64> {
    let mut ids = Vec::new();
    for (project, name) in starts {
        store
            .insert_command(&command(project, name, 1))
            .await
            .unwrap();
        let claimed = store.claim_commands("m", 7, 10).await.unwrap();
        ids.extend(claimed.iter().map(|c| c.instance.id));
    }
    ids
}

pub(crate) async fn instances_are_paged_and_counted_within_a_time_range(ctx: Ctx) {
    let store = ctx.store.clone();
    for (project, name) in [("p", "etl"), ("q", "etl")] {
        store
            .put_definition(&workflow(project, name, ""))
            .await
            .unwrap();
    }
    let ids = start_all(
        &store,
        &[
            ("p", "etl"),
            ("q", "etl"),
            ("p", "etl"),
            ("p", "etl"),
            ("p", "etl"),
        ],
    )
    .await;
    assert_eq!(ids.len(), 5);
    // Instance n (0-based) created at (n + 1) seconds.
    ctx.exec_raw(
        "UPDATE workflow_instance SET created_at = 1000 * \
         (SELECT COUNT(*) FROM workflow_instance o WHERE o.id <= workflow_instance.id)",
    )
    .await;
    let page = |filter: InstanceFilter| {
        let store = store.clone();
        async move {
            let rows = store.list_instances(&filter).await.unwrap();
            let total = store.count_instances(&filter).await.unwrap();
            (rows.into_iter().map(|r| r.id).collect::<Vec<_>>(), total)
        }
    };
    let all = InstanceFilter::default();
    assert_eq!(
        page(all.clone()).await,
        (vec![ids[4], ids[3], ids[2], ids[1], ids[0]], 5)
    );
    let second_page = InstanceFilter {
        limit: Some(2),
        offset: Some(2),
        ..all.clone()
    };
    assert_eq!(page(second_page).await, (vec![ids[2], ids[1]], 5));
    let past_the_end = InstanceFilter {
        offset: Some(5),
        ..all.clone()
    };
    assert_eq!(page(past_the_end).await, (vec![], 5));
    // from is inclusive, to exclusive: 2s..4s holds instances 1 and 2.
    let range = InstanceFilter {
        from: Some(2_000),
        to: Some(4_000),
        ..all.clone()
    };
    assert_eq!(page(range.clone()).await, (vec![ids[2], ids[1]], 2));
    let range_in_p = InstanceFilter {
        project: Some("p".into()),
        ..range
    };
    assert_eq!(page(range_in_p).await, (vec![ids[2]], 1));
    let since = InstanceFilter {
        from: Some(4_000),
        limit: Some(1),
        ..all.clone()
    };
    assert_eq!(page(since).await, (vec![ids[4]], 2));
    let nothing = InstanceFilter {
        to: Some(1_000),
        ..all
    };
    assert_eq!(page(nothing).await, (vec![], 0));
}

pub(crate) async fn a_page_of_100000_instances_is_read_quickly(ctx: Ctx) {
    // 100,000 rows planted behind the store's back, one per second from t = 1000 s.
    let sql = match ctx.store.backend() {
        Backend::Sqlite => {
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) \
             INSERT INTO workflow_instance (command_id, project, workflow, version, state, \
             priority, params, owner_epoch, created_at, options) \
             SELECT i, 'p', 'w' || (i % 50), 1, \
             CASE WHEN i % 100 = 0 THEN 'failure' ELSE 'success' END, 'medium', '{}', 1, \
             1000000 + i * 1000, '{}' FROM n"
        }
        Backend::Postgres => {
            "INSERT INTO workflow_instance (command_id, project, workflow, version, state, \
             priority, params, owner_epoch, created_at, options) \
             SELECT i, 'p', 'w' || (i % 50), 1, \
             CASE WHEN i % 100 = 0 THEN 'failure' ELSE 'success' END, 'medium', '{}', 1, \
             1000000 + i * 1000, '{}' FROM generate_series(1, 100000) AS i"
        }
        // MariaDB's sequence engine (the suite runs on MariaDB).
        Backend::Mysql => {
            "INSERT INTO workflow_instance (command_id, project, workflow, version, state, \
             priority, params, owner_epoch, created_at, options) \
             SELECT seq, 'p', CONCAT('w', seq % 50), 1, \
             CASE WHEN seq % 100 = 0 THEN 'failure' ELSE 'success' END, 'medium', '{}', 1, \
             1000000 + seq * 1000, '{}' FROM seq_1_to_100000"
        }
    };
    ctx.exec_raw(sql).await;
    match ctx.store.backend() {
        Backend::Postgres => ctx.exec_raw("ANALYZE workflow_instance").await,
        Backend::Mysql => ctx.exec_raw("ANALYZE TABLE workflow_instance").await,
        Backend::Sqlite => {}
    }
    let store = &ctx.store;
    for w in 0..50 {
        store
            .put_definition(&workflow("p", &format!("w{w}"), ""))
            .await
            .unwrap();
    }
    let started = Instant::now();
    // A page deep in a day-long range, and the range's count, as the UI asks.
    let filter = InstanceFilter {
        from: Some(1_000_000 + 10_000 * 1000),
        to: Some(1_000_000 + 96_400 * 1000),
        limit: Some(50),
        offset: Some(5_000),
        ..Default::default()
    };
    let rows = store.list_instances(&filter).await.unwrap();
    let total = store.count_instances(&filter).await.unwrap();
    assert_eq!(total, 86_400);
    assert_eq!(rows.len(), 50);
    assert_eq!(rows[0].created_at, 1_000_000 + (96_399 - 5_000) * 1000);
    // The newest page of everything, and one workflow's newest page.
    let newest = store
        .list_instances(&InstanceFilter::default())
        .await
        .unwrap();
    assert_eq!(newest[0].command_id, 100_000);
    let one = InstanceFilter {
        workflow: Some("w7".into()),
        limit: Some(20),
        ..Default::default()
    };
    assert_eq!(store.list_instances(&one).await.unwrap().len(), 20);
    assert_eq!(store.count_instances(&one).await.unwrap(), 2_000);
    // The failed runs, newest first.
    let failed = InstanceFilter {
        state: Some(WorkflowState::Failure),
        limit: Some(20),
        ..Default::default()
    };
    let rows = store.list_instances(&failed).await.unwrap();
    assert_eq!(rows.len(), 20);
    assert_eq!(rows[0].command_id, 100_000);
    assert_eq!(store.count_instances(&failed).await.unwrap(), 1_000);
    let latest = store.latest_instances("p").await.unwrap();
    assert_eq!(latest.len(), 50);
    assert!(latest.iter().any(|r| r.command_id == 100_000), "{latest:?}");
    let took = started.elapsed();
    // Index reads: milliseconds each (tens of ms for the counts); a bound that only a
    // scan-and-sort of every row per query would break under test load.
    eprintln!("{:?}: the listings took {took:?}", ctx.store.backend());
    assert!(took < Duration::from_secs(2), "listing took {took:?}");
    // As many as the API lets a call ask for, not fewer.
    let most = InstanceFilter {
        limit: Some(shoal_store::MAX_INSTANCE_LIST),
        ..Default::default()
    };
    assert_eq!(store.list_instances(&most).await.unwrap().len(), 10_000);
}

pub(crate) async fn projects_versions_and_the_latest_run_of_each_workflow(ctx: Ctx) {
    let store = ctx.store.clone();
    let projects = store.list_projects().await.unwrap();
    assert_eq!(projects.len(), 1, "{projects:?}");
    assert_eq!(
        (projects[0].name.as_str(), projects[0].workflows),
        ("default", 0)
    );
    store
        .put_definition(&workflow("p", "etl", ""))
        .await
        .unwrap();
    store
        .put_definition(&workflow("p", "etl", "v2"))
        .await
        .unwrap();
    store
        .put_definition(&workflow("p", "report", ""))
        .await
        .unwrap();
    store
        .put_definition(&workflow("q", "etl", ""))
        .await
        .unwrap();
    // Applying to a project creates it; `default` always exists.
    let projects: Vec<(String, i64)> = store
        .list_projects()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.workflows))
        .collect();
    assert_eq!(
        projects,
        [("default".into(), 0), ("p".into(), 2), ("q".into(), 1)]
    );

    // The latest version of every workflow of every project, in one read.
    let latest: Vec<(String, String, i32, String)> = (store.latest_definitions().await)
        .unwrap()
        .into_iter()
        .map(|d| (d.project, d.name, d.version, d.definition.description))
        .collect();
    let row = |p: &str, n: &str, v, d: &str| (p.to_string(), n.to_string(), v, d.to_string());
    assert_eq!(
        latest,
        [
            row("p", "etl", 2, "v2"),
            row("p", "report", 1, ""),
            row("q", "etl", 1, "")
        ]
    );

    let versions = store.list_versions("p", "etl").await.unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        [2, 1]
    );
    assert!(versions[0].created_at >= versions[1].created_at);
    assert!(store.list_versions("p", "nope").await.unwrap().is_empty());

    assert!(store.latest_instances("p").await.unwrap().is_empty());
    let ids = start_all(&store, &[("p", "etl"), ("q", "etl"), ("p", "etl")]).await;
    let mut latest: Vec<(String, i64)> = store
        .latest_instances("p")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.workflow, r.id))
        .collect();
    latest.sort();
    // report never ran; etl's second run is its latest.
    assert_eq!(latest, [("etl".to_string(), ids[2])]);
    let in_q: Vec<i64> = store
        .latest_instances("q")
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(in_q, [ids[1]]);
}
