//! sql tasks on the machine's real MySQL/MariaDB (127.0.0.1:3306, or `SHOAL_TEST_MYSQL`), a
//! fresh database per test.

use super::task_types::{def_task, json_output, log_text, now_nanos, outputs, run_one, sql_task};
use super::*;
use serde_json::json;
use shoal_testkit::TestMysqlDb;
use sqlx::MySqlPool;
use std::time::Instant;

#[tokio::test]
async fn sql_task_on_mysql_returns_typed_rows_and_server_errors() {
    let db = TestMysqlDb::create("shoal_sqltask");
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let maria = db.url.replacen("mysql://", "mariadb://", 1);
    let datasources = BTreeMap::from([
        ("my".to_string(), db.url.clone()),
        ("maria".to_string(), maria),
        ("tz".to_string(), format!("{}?timezone=%2B08:00", db.url)),
    ]);
    let mut w = start_worker_with(4, datasources).await;

    // Several statements in one task.
    let setup = sql_task(
        151,
        "my",
        "CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(10,2), city VARCHAR(20), \
             placed DATETIME, note VARCHAR(20), paid BOOLEAN, big BIGINT UNSIGNED, \
             ratio DOUBLE, code VARBINARY(4), bits BIT(4), day DATE);
         INSERT INTO orders VALUES
             (1, 12.50, '上海', '2026-01-02 03:04:05', NULL, TRUE, 18446744073709551615,
              0.5, 'ab', b'1010', '2026-01-02'),
             (2, -3.00, '北京', '2026-02-03 00:00:00', 'x', FALSE, 0, 1e300, 0xFF00, b'0',
              NULL);",
        "none",
        &master.addr,
    );
    let done = run_one(&mut w, &mut master, &setup).await;
    assert_eq!(done.kind, TaskEventKind::Success as i32, "{done:?}");
    assert!(done.output.is_empty());
    let log = log_text(&mut w, &setup).await;
    assert!(
        log.contains("[shoal] sql on datasource 'my':\nCREATE TABLE orders"),
        "{log}"
    );
    assert!(log.contains("0 rows returned, 2 rows affected"), "{log}");

    // The same database through a mariadb:// URL; values as the server renders them.
    let query = "SELECT id, amount, city, placed, note, paid, big, ratio, code, bits, day \
                 FROM orders ORDER BY id";
    let t = sql_task(152, "maria", query, "first_row", &master.addr);
    let first = run_one(&mut w, &mut master, &t).await;
    assert_eq!(first.kind, TaskEventKind::Success as i32, "{first:?}");
    assert_eq!(
        outputs(&first),
        BTreeMap::from([
            ("id", "1"),
            ("amount", "12.50"),
            ("city", "上海"),
            ("placed", "2026-01-02 03:04:05"),
            ("note", ""),
            ("paid", "true"),
            ("big", "18446744073709551615"),
            ("ratio", "0.5"),
            ("code", "ab"),
            ("bits", "10"),
            ("day", "2026-01-02"),
        ])
    );

    let t = sql_task(153, "my", query, "all_rows", &master.addr);
    let all = run_one(&mut w, &mut master, &t).await;
    assert_eq!(all.kind, TaskEventKind::Success as i32, "{all:?}");
    assert_eq!(all.output.len(), 11);
    assert_eq!(json_output(&all, "id"), json!([1, 2]));
    assert_eq!(json_output(&all, "amount"), json!([12.5, -3.0]));
    assert_eq!(json_output(&all, "city"), json!(["上海", "北京"]));
    assert_eq!(
        json_output(&all, "placed"),
        json!(["2026-01-02 03:04:05", "2026-02-03 00:00:00"])
    );
    assert_eq!(json_output(&all, "note"), json!([null, "x"]));
    assert_eq!(json_output(&all, "paid"), json!([true, false]));
    assert_eq!(json_output(&all, "big"), json!([u64::MAX, 0]));
    assert_eq!(json_output(&all, "ratio"), json!([0.5, 1e300]));
    // Bytes that are not UTF-8 come out in hex, not as replacement characters.
    assert_eq!(json_output(&all, "code"), json!(["ab", "0xff00"]));
    assert_eq!(json_output(&all, "bits"), json!([10, 0]));
    assert_eq!(json_output(&all, "day"), json!(["2026-01-02", null]));
    assert!(log_text(&mut w, &t).await.contains("2 rows returned"));

    // Outputs come from the first statement that returns rows. The session is set up as
    // for any other client: `||` is OR, not concatenation, and the time zone the server's.
    let t = sql_task(
        154,
        "my",
        "UPDATE orders SET note = 'y' WHERE id = 1;
         SELECT note, 0 || 1 AS either, @@session.time_zone = @@global.time_zone AS server_tz
         FROM orders WHERE id = 1;
         SELECT 'later' AS note",
        "first_row",
        &master.addr,
    );
    let done = run_one(&mut w, &mut master, &t).await;
    assert_eq!(done.kind, TaskEventKind::Success as i32, "{done:?}");
    assert_eq!(
        outputs(&done),
        BTreeMap::from([("note", "y"), ("either", "1"), ("server_tz", "1")])
    );
    let log = log_text(&mut w, &t).await;
    assert!(log.contains("2 rows returned, 1 rows affected"), "{log}");
    // A time zone the URL names is the session's.
    let t = sql_task(
        157,
        "tz",
        "SELECT @@session.time_zone AS tz",
        "first_row",
        &master.addr,
    );
    let done = run_one(&mut w, &mut master, &t).await;
    assert_eq!(outputs(&done), BTreeMap::from([("tz", "+08:00")]));

    // A server error: its message in the event and the log; the statements after it in
    // the script do not run.
    let t = sql_task(
        155,
        "my",
        "UPDATE orders SET note = 'z' WHERE id = 2; SELECT * FROM nope; \
         DELETE FROM orders",
        "none",
        &master.addr,
    );
    let failed = run_one(&mut w, &mut master, &t).await;
    assert_eq!(failed.kind, TaskEventKind::Failure as i32);
    let missing = format!("Table '{}.nope' doesn't exist", db.name);
    assert!(failed.message.contains(&missing), "{}", failed.message);
    assert!(log_text(&mut w, &t).await.contains(&missing));
    let t = sql_task(
        156,
        "my",
        "SELECT COUNT(*) AS n, MAX(note) AS note FROM orders",
        "first_row",
        &master.addr,
    );
    let left = run_one(&mut w, &mut master, &t).await;
    assert_eq!(outputs(&left), BTreeMap::from([("n", "2"), ("note", "z")]));
}

/// How many statements containing `marker` the server runs for other sessions.
async fn running(pool: &MySqlPool, marker: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
         WHERE INFO LIKE CONCAT('%', ?, '%') AND ID <> CONNECTION_ID()",
    )
    .bind(marker)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Waits until the server runs `marker`'s statement (`want`) or no longer does.
async fn until_running(pool: &MySqlPool, marker: &str, want: bool) {
    let deadline = Instant::now() + WAIT;
    while (running(pool, marker).await > 0) != want {
        assert!(
            Instant::now() < deadline,
            "statement {marker} running: {}, wanted {want}",
            !want
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_stopped_mysql_sql_task_ends_its_statement_on_the_server() {
    let db = TestMysqlDb::create("shoal_sqlstop");
    let pool = MySqlPool::connect(&db.url).await.unwrap();
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let datasources = BTreeMap::from([("my".to_string(), db.url.clone())]);
    let mut w = start_worker_with(4, datasources).await;

    // Timed out.
    let marker = format!("shoal_timeout_{}_{}", std::process::id(), now_nanos());
    let t = def_task(
        161,
        json!({
            "type": "sql",
            "sql": {"datasource": "my", "query": format!("SELECT SLEEP(30) AS {marker}")},
            "timeout": "1s",
            "timeout_strategy": "fail",
        }),
        &master.addr,
    );
    let sent = Instant::now();
    let done = run_one(&mut w, &mut master, &t).await;
    assert_eq!(done.kind, TaskEventKind::Failure as i32, "{done:?}");
    assert_eq!(done.message, "timed out after 1s");
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    until_running(&pool, &marker, false).await;

    // Killed, once the server runs it.
    let marker = format!("shoal_kill_{}_{}", std::process::id(), now_nanos());
    let t = sql_task(
        162,
        "my",
        &format!("SELECT SLEEP(30) AS {marker}"),
        "first_row",
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [162]);
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);
    until_running(&pool, &marker, true).await;
    let asked = Instant::now();
    assert!(w.kill(&t).await);
    assert_eq!(
        kinds(&master.until_done(162).await),
        [TaskEventKind::Killed]
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    until_running(&pool, &marker, false).await;
    assert!(log_text(&mut w, &t).await.contains("[shoal] task killed"));
    pool.close().await;
}

#[tokio::test]
async fn a_mysql_datasource_s_password_stays_out_of_the_task_s_message_and_log() {
    let db = TestMysqlDb::create("shoal_sqlpw");
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let password = "Pw-of-the-warehouse-7731";
    // The server's root has no password: one given is refused.
    let url = db
        .url
        .replacen("://root@", &format!("://root:{password}@"), 1);
    assert_ne!(url, db.url, "{}", db.url);
    let datasources = BTreeMap::from([("wh".to_string(), url.clone())]);
    let mut w = start_worker_with(4, datasources).await;
    let t = sql_task(171, "wh", "SELECT 1", "first_row", &master.addr);
    let failed = run_one(&mut w, &mut master, &t).await;
    assert_eq!(failed.kind, TaskEventKind::Failure as i32);
    assert!(
        failed.message.contains("Access denied for user 'root'"),
        "{}",
        failed.message
    );
    let log = log_text(&mut w, &t).await;
    assert!(log.contains("Access denied"), "{log}");
    assert!(
        !failed.message.contains(password) && !log.contains(password),
        "{} {log}",
        failed.message
    );

    // A project's own datasource (a secret, masked wherever the task would show it).
    let mut t = sql_task(
        172,
        "own",
        &format!("SELECT '{url}' AS url"),
        "first_row",
        &master.addr,
    );
    t.datasources = HashMap::from([("own".to_string(), db.url.clone())]);
    t.masked = vec![url.clone(), db.url.clone()];
    let done = run_one(&mut w, &mut master, &t).await;
    assert_eq!(done.kind, TaskEventKind::Success as i32, "{done:?}");
    assert_eq!(outputs(&done), BTreeMap::from([("url", "***")]));
    let log = log_text(&mut w, &t).await;
    assert!(log.contains("SELECT '***' AS url"), "{log}");
    assert!(!log.contains(password), "{log}");
}
