//! External tasks, over the real `shoal standalone` and over a cluster of processes: an
//! external worker (this test, over HTTP) takes a task by a long poll, renews its lease,
//! logs and completes it once, its outputs flowing downstream; a lease left to lapse fails
//! the attempt as lost and the retry is offered again; a batch of completions ends each
//! task under its own lease, once; the worker role sees only its projects' tasks and
//! nothing else; bad input is refused with the reason.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{Env, LONG, Standalone, attempts, lines, set_secret, wait_for};

support::deployments!(
    an_external_task_is_taken_renewed_logged_and_completed_once,
    a_lapsed_lease_fails_the_attempt_and_its_retry_is_offered_again,
    a_stopped_run_takes_its_external_task_back_from_its_worker,
    a_released_task_goes_back_to_its_queue_for_another_worker,
    external_mistakes_are_refused_with_the_reason,
    a_batch_completes_each_task_under_its_own_lease,
    concurrent_duplicate_batches_complete_each_task_once,
);

/// Polls `queue` as `worker`, waiting up to `wait`; the tasks taken.
fn poll(e: &Env, queue: &str, worker: &str, wait: &str) -> Vec<Value> {
    let body = json!({"queues": [queue], "worker": worker, "max": 10, "wait": wait});
    let (status, tasks) = e.api().post("/external/poll", &body.to_string());
    assert_eq!(status, 200, "{tasks}");
    tasks.as_array().unwrap().clone()
}

/// Polls until a task is taken.
fn take(e: &Env, queue: &str, worker: &str) -> Value {
    wait_for("an external task to be offered", LONG, || {
        poll(e, queue, worker, "5s").into_iter().next()
    })
}

fn call(e: &Env, task: &Value, what: &str, body: Value) -> (u16, Value) {
    let id = task["task_instance_id"].as_i64().unwrap();
    let mut body = body;
    body["lease_token"] = task["lease_token"].clone();
    e.api()
        .post(&format!("/external/{id}/{what}"), &body.to_string())
}

fn an_external_task_is_taken_renewed_logged_and_completed_once(e: Env) {
    set_secret(&e, "resize_key", "k-9f3b");
    let seen = e.path("seen");
    e.apply(&format!(
        r#"
name: images
params: {{ order: "42" }}
tasks:
  - name: resize
    type: external
    queue: images
    lease: 30s
    params: {{ order_id: "order-${{order}}", key: "${{secret.resize_key}}" }}
  - {{ name: ship, type: shell, depends_on: [resize], command: "echo ${{width}} >> {f}" }}
"#,
        f = seen.display()
    ));
    // A long poll with nothing offered answers empty when its wait is up.
    let asked = Instant::now();
    assert!(poll(&e, "images", "resizer-7", "1s").is_empty());
    assert!(asked.elapsed() >= Duration::from_millis(900));

    let id = e.start("images", "{}");
    let task = take(&e, "images", "resizer-7");
    assert_eq!(task["workflow_instance_id"], id, "{task}");
    assert_eq!(task["task"], "resize");
    assert_eq!(task["workflow"], "images");
    assert_eq!(task["project"], "default");
    assert_eq!(task["queue"], "images");
    assert_eq!(task["attempt"], 1);
    assert_eq!(
        task["params"],
        json!({"order_id": "order-42", "key": "k-9f3b"}),
        "params are expanded, the secret they name included"
    );
    let tid = task["task_instance_id"].as_i64().unwrap();
    let row = e.api().get(&format!("/task-instances/{tid}"));
    assert_eq!(row["state"], "waiting", "{row}");
    assert_eq!(row["worker"], "resizer-7", "{row}");
    let offer = &row["external"];
    assert_eq!(
        (&offer["queue"], &offer["worker"]),
        (&json!("images"), &json!("resizer-7"))
    );
    assert_eq!(offer["lease_expires_at"], task["lease_expires_at"], "{row}");
    let detail = e.api().get(&format!("/instances/{id}"));
    assert_eq!(
        attempts(&detail, "resize")[0]["external"],
        *offer,
        "{detail}"
    );
    let queue = images_queue(&e);
    assert_eq!(
        (&queue["waiting"], &queue["taken"]),
        (&json!(0), &json!(1)),
        "{queue}"
    );
    assert_eq!(queue["workers"][0]["name"], "resizer-7", "{queue}");
    assert_eq!(queue["workers"][0]["holding"], 1, "{queue}");
    assert!(
        poll(&e, "images", "other", "0s").is_empty(),
        "a taken task is not offered twice"
    );

    let (status, renewed) = call(&e, &task, "heartbeat", json!({}));
    assert_eq!(status, 200, "{renewed}");
    assert!(
        renewed["lease_expires_at"].as_str().unwrap() >= task["lease_expires_at"].as_str().unwrap()
    );
    let (status, body) = call(&e, &task, "log", json!({"text": "resized to 640 px\n"}));
    assert_eq!(status, 204, "{body}");
    let (source, log) = e.api().log(tid);
    assert!(
        log.contains("resized to 640 px"),
        "the log shows it live: {log}"
    );
    assert_eq!(source, "store");

    let done = json!({"state": "success", "outputs": {"width": 640}, "message": "resized"});
    let (status, body) = call(&e, &task, "complete", done.clone());
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&e, &task, "complete", done);
    assert_eq!(status, 409, "a second completion does not count: {body}");
    assert!(
        body["error"].as_str().unwrap().contains("ended already"),
        "{body}"
    );
    let (status, _) = call(&e, &task, "heartbeat", json!({}));
    assert_eq!(status, 409, "nor does a heartbeat after the end");

    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(lines(&seen), ["640"], "the output flowed downstream");
    let resize = attempts(&inst, "resize")[0];
    assert_eq!(resize["message"], "resized", "{resize}");
    assert!(
        resize.get("external").is_none(),
        "offered no more: {resize}"
    );
    let queue = images_queue(&e);
    assert_eq!(queue["taken"], 0, "{queue}");
    let seen = &queue["workers"][0];
    assert_eq!(
        (&seen["name"], &seen["holding"]),
        (&json!("resizer-7"), &json!(0)),
        "seen recently: {queue}"
    );
}

/// The `images` queue of project default as `GET /external/queues` lists it.
fn images_queue(e: &Env) -> Value {
    let queues = e.api().get("/external/queues");
    let found = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "images" && q["project"] == "default");
    found
        .unwrap_or_else(|| panic!("no queue images: {queues}"))
        .clone()
}

fn a_lapsed_lease_fails_the_attempt_and_its_retry_is_offered_again(e: Env) {
    e.apply(
        "name: flaky\ntasks:\n- { name: step, type: external, queue: slow, lease: 1s, retries: 1 }\n",
    );
    let id = e.start("flaky", "{}");
    let first = take(&e, "slow", "sleepy");
    // No heartbeat: the lease lapses, the attempt fails as lost, the retry is offered.
    let second = take(&e, "slow", "awake");
    assert_eq!(second["attempt"], 2, "{second}");
    assert_ne!(second["task_instance_id"], first["task_instance_id"]);
    let (status, body) = call(&e, &first, "complete", json!({}));
    assert_eq!(
        status, 409,
        "the lapsed lease's completion does not count: {body}"
    );
    assert!(body["error"].as_str().unwrap().contains("lost"), "{body}");
    let (status, body) = call(&e, &second, "complete", json!({"outputs": {"n": 1}}));
    assert_eq!(status, 200, "{body}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    let tries = attempts(&inst, "step");
    assert_eq!(tries[0]["state"], "failure");
    let lost = tries[0]["message"].as_str().unwrap();
    assert!(lost.contains("sleepy") && lost.contains("lease"), "{lost}");
}

fn a_stopped_run_takes_its_external_task_back_from_its_worker(e: Env) {
    e.apply("name: stoppable\ntasks:\n- { name: long, type: external, queue: stops }\n");
    let id = e.start("stoppable", "{}");
    let task = take(&e, "stops", "w1");
    let (status, body) = e.action(id, "stop");
    assert_eq!(status, 202, "{body}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "stopped", "{inst}");
    let (status, body) = call(&e, &task, "heartbeat", json!({}));
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("killed"), "{body}");
    let (status, _) = call(&e, &task, "complete", json!({}));
    assert_eq!(status, 409, "a stopped task is not completed");
}

fn a_released_task_goes_back_to_its_queue_for_another_worker(e: Env) {
    e.apply("name: handback\ntasks:\n- { name: step, type: external, queue: back, lease: 30s }\n");
    let id = e.start("handback", "{}");
    let first = take(&e, "back", "leaving");
    assert!(
        poll(&e, "back", "other", "0s").is_empty(),
        "taken: not offered"
    );
    // A long poll waiting meanwhile takes it (woken by the release, or at its next look).
    let (second, asked) = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| poll(&e, "back", "staying", "30s"));
        std::thread::sleep(Duration::from_millis(300));
        let asked = Instant::now();
        let (status, body) = call(&e, &first, "release", json!({}));
        assert_eq!(status, 204, "{body}");
        (waiting.join().unwrap(), asked)
    });
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the waiting poll took the released task"
    );
    let [second] = &second[..] else {
        panic!("the released task is taken again: {second:?}")
    };
    assert_eq!(second["task_instance_id"], first["task_instance_id"]);
    assert_eq!(
        second["attempt"], 1,
        "the same attempt: a release is no failure"
    );
    for what in ["heartbeat", "complete", "release"] {
        let (status, body) = call(&e, &first, what, json!({}));
        assert_eq!(status, 409, "{what} with the released lease: {body}");
    }
    let (status, body) = call(&e, second, "complete", json!({}));
    assert_eq!(status, 200, "{body}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    let tries = attempts(&inst, "step");
    assert_eq!(tries.len(), 1, "{inst}");
    assert_eq!(tries[0]["worker"], "staying", "{inst}");
}

fn external_mistakes_are_refused_with_the_reason(e: Env) {
    let refused = |path: &str, body: &str, status: u16, says: &str| {
        let (got, answer) = e.api().post(path, body);
        assert_eq!(got, status, "{path} {body}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(says), "{path} {body}: {error}");
    };
    let apply = "/projects/default/workflows";
    refused(
        apply,
        "name: x\ntasks:\n- { name: a, type: external }\n",
        400,
        "needs 'queue'",
    );
    refused(
        apply,
        "name: x\ntasks:\n- { name: a, type: external, queue: q, lease: 0s }\n",
        400,
        "lease",
    );
    refused(
        apply,
        "name: x\ntasks:\n- { name: a, type: shell, command: 'true', queue: q }\n",
        400,
        "external tasks only",
    );
    refused(
        apply,
        "name: x\ntasks:\n- { name: a, type: external, queue: 'a b' }\n",
        400,
        "queue",
    );

    let poll = "/external/poll";
    refused(poll, r#"{"queues": [], "worker": "w"}"#, 400, "queues");
    refused(
        poll,
        r#"{"queues": ["a/b"], "worker": "w"}"#,
        400,
        "queue name",
    );
    refused(
        poll,
        r#"{"queues": ["q"], "worker": "w", "max": 0}"#,
        400,
        "max 0",
    );
    refused(
        poll,
        r#"{"queues": ["q"], "worker": "w", "wait": "5m"}"#,
        400,
        "at most 60s",
    );
    refused(
        poll,
        r#"{"queues": ["q"], "wrker": "w"}"#,
        400,
        "unknown field",
    );

    e.apply("name: once\ntasks:\n- { name: a, type: external, queue: mistakes }\n");
    let id = e.start("once", "{}");
    let task = take(&e, "mistakes", "w");
    let tid = task["task_instance_id"].as_i64().unwrap();
    let wrong = json!({"lease_token": "shoal_not-the-token"}).to_string();
    refused(
        &format!("/external/{tid}/heartbeat"),
        &wrong,
        409,
        "does not hold",
    );
    refused(
        &format!("/external/{tid}/complete"),
        &wrong,
        409,
        "does not hold",
    );
    let (status, body) = call(&e, &task, "complete", json!({"outputs": [1, 2]}));
    assert_eq!(status, 400, "outputs must be an object: {body}");
    let (status, body) = call(&e, &task, "complete", json!({"state": "killed"}));
    assert_eq!(status, 400, "{body}");
    refused("/external/999999/heartbeat", &wrong, 404, "does not exist");
    // None of it changed the task.
    let row = e.api().get(&format!("/task-instances/{tid}"));
    assert_eq!(row["state"], "waiting", "{row}");
    let (status, body) = call(&e, &task, "complete", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(e.end(id)["state"], "success");
}

/// Polls `queue` until `n` tasks are taken (by as many polls as it takes).
fn take_n(e: &Env, queue: &str, n: usize) -> Vec<Value> {
    let mut taken = Vec::new();
    wait_for("the external tasks to be offered", LONG, || {
        taken.extend(poll(e, queue, "batcher", "2s"));
        (taken.len() >= n).then_some(())
    });
    assert_eq!(taken.len(), n, "{taken:?}");
    taken
}

/// A completion of a batch for `task`, with `extra` fields.
fn item(task: &Value, extra: Value) -> Value {
    let mut item = json!({
        "task_instance_id": task["task_instance_id"],
        "lease_token": task["lease_token"],
    });
    for (k, v) in extra.as_object().unwrap() {
        item[k] = v.clone();
    }
    item
}

fn complete_batch(e: &Env, items: &[Value]) -> (u16, Value) {
    e.api().post(
        "/external/complete",
        &Value::from(items.to_vec()).to_string(),
    )
}

fn a_batch_completes_each_task_under_its_own_lease(e: Env) {
    e.apply(
        "name: batched\ntasks:\n- { name: a, type: external, queue: batch }\n\
         - { name: b, type: external, queue: batch }\n\
         - { name: c, type: external, queue: batch }\n",
    );
    let id = e.start("batched", "{}");
    let mut tasks = take_n(&e, "batch", 3);
    tasks.sort_by_key(|t| t["task"].as_str().unwrap().to_string());
    let [a, b, c] = &tasks[..] else {
        unreachable!()
    };
    // c's lease is lost: released, then taken again under another token.
    let (status, body) = call(&e, c, "release", json!({}));
    assert_eq!(status, 204, "{body}");
    let c2 = take(&e, "batch", "batcher");
    assert_eq!(c2["task_instance_id"], c["task_instance_id"]);

    // Bad batches are refused whole, naming what is wrong, and change nothing.
    let refused = |items: &[Value], says: &str| {
        let (status, body) = complete_batch(&e, items);
        assert_eq!(status, 400, "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(says), "{says}: {error}");
    };
    let good = item(a, json!({"outputs": {"wa": 1}}));
    refused(&[], "send 1 to 100");
    refused(&vec![good.clone(); 101], "send 1 to 100");
    refused(
        &[good.clone(), item(b, json!({"outputs": [1, 2]}))],
        "completion 1: invalid type",
    );
    refused(
        &[good.clone(), item(b, json!({"outputs": {"o": [1]}}))],
        "completion 1 (task instance",
    );
    refused(
        &[good.clone(), item(b, json!({"state": "killed"}))],
        "completion 1 (task instance",
    );
    refused(
        &[good.clone(), item(b, json!({"sate": "success"}))],
        "unknown field",
    );
    refused(&[good.clone(), good.clone()], "named twice");
    for t in [a, b, c] {
        let tid = t["task_instance_id"].as_i64().unwrap();
        let row = e.api().get(&format!("/task-instances/{tid}"));
        assert_eq!(row["state"], "waiting", "nothing changed: {row}");
    }

    // A batch with c's stale lease: a and b end, c is answered on its own and stays.
    let stale = item(c, json!({"outputs": {"wc": "stale"}}));
    let failing = item(b, json!({"state": "failure", "message": "no disk"}));
    let (status, body) = complete_batch(&e, &[good, stale, failing]);
    assert_eq!(status, 200, "{body}");
    let outcomes = body.as_array().unwrap();
    let ids: Vec<&Value> = outcomes.iter().map(|o| &o["task_instance_id"]).collect();
    assert_eq!(
        ids,
        [
            &a["task_instance_id"],
            &c["task_instance_id"],
            &b["task_instance_id"]
        ],
        "in the order sent"
    );
    assert_eq!(
        (&outcomes[0]["status"], &outcomes[0]["state"]),
        (&json!(200), &json!("success"))
    );
    assert_eq!(outcomes[1]["status"], 409, "{body}");
    assert!(
        outcomes[1]["error"]
            .as_str()
            .unwrap()
            .contains("does not hold"),
        "{body}"
    );
    assert_eq!(
        (&outcomes[2]["status"], &outcomes[2]["state"]),
        (&json!(200), &json!("failure"))
    );
    let ctid = c["task_instance_id"].as_i64().unwrap();
    let row = e.api().get(&format!("/task-instances/{ctid}"));
    assert_eq!(
        row["state"], "waiting",
        "the stale completion did not count: {row}"
    );

    // The same batch again: each answered as ended already.
    let (status, body) = complete_batch(&e, &[item(a, json!({}))]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["status"], 409, "{body}");
    assert!(
        body[0]["error"].as_str().unwrap().contains("ended already"),
        "{body}"
    );
    let (status, body) = complete_batch(&e, &[item(&c2, json!({"outputs": {"wc": "x"}}))]);
    assert_eq!((status, &body[0]["status"]), (200, &json!(200)), "{body}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure", "b failed: {inst}");
    let b_row = attempts(&inst, "b")[0];
    assert_eq!(b_row["message"], "no disk", "{b_row}");
    let a_row = attempts(&inst, "a")[0];
    assert_eq!(a_row["output"], json!({"wa": "1"}), "{a_row}");
    assert_eq!(
        attempts(&inst, "c")[0]["output"],
        json!({"wc": "x"}),
        "{inst}"
    );
}

fn concurrent_duplicate_batches_complete_each_task_once(e: Env) {
    const N: usize = 30;
    let tasks: Vec<Value> = (0..N)
        .map(|i| json!({"name": format!("t{i}"), "type": "external", "queue": "dupes"}))
        .collect();
    e.apply(&json!({"name": "dupes", "tasks": tasks}).to_string());
    let id = e.start("dupes", "{}");
    let taken = take_n(&e, "dupes", N);
    let items: Vec<Value> = taken
        .iter()
        .map(|t| item(t, json!({"outputs": {"by": "batch"}})))
        .collect();
    // 6 senders, each the whole batch at once (a worker retrying, or duplicated).
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let senders: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    let (status, body) = complete_batch(&e, &items);
                    assert_eq!(status, 200, "{body}");
                    body
                })
            })
            .collect();
        senders.into_iter().map(|s| s.join().unwrap()).collect()
    });
    for t in &taken {
        let tid = &t["task_instance_id"];
        let statuses: Vec<i64> = answers
            .iter()
            .flat_map(|a| a.as_array().unwrap())
            .filter(|o| o["task_instance_id"] == *tid)
            .map(|o| o["status"].as_i64().unwrap())
            .collect();
        let counted = statuses.iter().filter(|s| **s == 200).count();
        assert_eq!(counted, 1, "task instance {tid}: {statuses:?}");
        assert!(
            statuses.iter().all(|s| [200, 409].contains(s)),
            "{statuses:?}"
        );
    }
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    let rows = inst["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), N, "one attempt each: {inst}");
    assert!(rows.iter().all(|t| t["output"] == json!({"by": "batch"})));
}

/// A user with the worker role in a project takes and completes that project's external
/// tasks, and nothing else; a viewer may not poll; both are audited.
#[test]
fn the_worker_role_works_its_projects_external_tasks_and_nothing_else() {
    let e = Env::Standalone(Standalone::start_with(&[(
        "SHOAL_TOKEN",
        support::API_TOKEN,
    )]));
    let api = e.api();
    for p in ["imgs", "other"] {
        let (status, body) = api.post("/projects", &json!({"name": p}).to_string());
        assert_eq!(status, 201, "{body}");
        let def = format!(
            "name: w\nproject: {p}\ntasks:\n- {{ name: a, type: external, queue: shared }}\n"
        );
        let (status, body) = api.post(&format!("/projects/{p}/workflows"), &def);
        assert!(status < 300, "{body}");
    }
    let token_of = |user: &str, role: &str| {
        let (status, body) = api.post("/users", &json!({"name": user}).to_string());
        assert_eq!(status, 201, "{body}");
        let (status, token) = api.post("/tokens", &json!({"name": "t", "user": user}).to_string());
        assert_eq!(status, 201, "{token}");
        let member = json!({"role": role}).to_string();
        let (status, body) = api.put(&format!("/projects/imgs/members/{user}"), &member);
        assert_eq!(status, 200, "{body}");
        token["token"].as_str().unwrap().to_string()
    };
    let wally = token_of("wally", "worker");
    let vic = token_of("vic", "viewer");
    let http = reqwest::blocking::Client::new();
    let as_user = |token: &str, path: &str, body: Value| {
        let resp = http
            .post(format!("{}/api/v1{path}", api.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .unwrap();
        (
            resp.status().as_u16(),
            resp.json::<Value>().unwrap_or(Value::Null),
        )
    };
    let mut instances = Vec::new();
    for p in ["other", "imgs"] {
        let (status, body) = api.post(&format!("/projects/{p}/workflows/w/start"), "{}");
        assert_eq!(status, 202, "{body}");
        instances.push(e.instance_of(body["command_id"].as_i64().unwrap()));
    }
    let poll = json!({"queues": ["shared"], "worker": "wally-box", "max": 10, "wait": "10s"});
    let (status, body) = as_user(&vic, "/external/poll", poll.clone());
    assert_eq!(status, 403, "a viewer does not work tasks: {body}");
    assert!(
        body["error"].as_str().unwrap().contains("worker role"),
        "{body}"
    );

    let taken = wait_for("wally to take imgs' task", LONG, || {
        let (status, body) = as_user(&wally, "/external/poll", poll.clone());
        assert_eq!(status, 200, "{body}");
        let tasks = body.as_array().unwrap().clone();
        (!tasks.is_empty()).then_some(tasks)
    });
    assert_eq!(taken.len(), 1, "only its project's task: {taken:?}");
    assert_eq!(taken[0]["project"], "imgs");
    let queues_as = |token: &str| -> Value {
        let resp = http
            .get(format!("{}/api/v1/external/queues", api.base))
            .bearer_auth(token)
            .send()
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().unwrap()
    };
    let seen = queues_as(&vic);
    let seen = seen.as_array().unwrap();
    assert_eq!(
        seen.len(),
        1,
        "a viewer lists its projects' queues only: {seen:?}"
    );
    assert_eq!(
        (&seen[0]["project"], &seen[0]["taken"]),
        (&json!("imgs"), &json!(1))
    );
    assert_eq!(seen[0]["workers"][0]["name"], "wally-box");
    assert_eq!(queues_as(&wally), json!([]), "a worker sees no project");
    assert_eq!(
        api.get("/external/queues").as_array().unwrap().len(),
        2,
        "an admin sees all"
    );
    let (other, imgs) = (instances[0], instances[1]);
    let get = |token: &str, path: &str| {
        let resp = http
            .get(format!("{}/api/v1{path}", api.base))
            .bearer_auth(token)
            .send()
            .unwrap();
        resp.status().as_u16()
    };
    assert_eq!(
        get(&wally, &format!("/instances/{imgs}")),
        403,
        "a worker reads nothing"
    );
    assert_eq!(get(&wally, &format!("/instances/{other}")), 404);
    let listed: Value = http
        .get(format!("{}/api/v1/instances", api.base))
        .bearer_auth(&wally)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        0,
        "a worker lists no runs: {listed}"
    );

    let tid = taken[0]["task_instance_id"].as_i64().unwrap();
    // In a batch, a task of a project wally has no role in is answered as one that does
    // not exist, one under another lease as lost; a viewer may send no batch.
    let hidden = wait_for("the other project's task", LONG, || {
        let detail = api.get(&format!("/instances/{other}"));
        detail["tasks"][0]["id"].as_i64()
    });
    let batch = json!([
        {"task_instance_id": tid, "lease_token": "shoal_not-the-token"},
        {"task_instance_id": hidden, "lease_token": "shoal_not-the-token"},
    ]);
    let (status, body) = as_user(&wally, "/external/complete", batch.clone());
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body[0]["status"], &body[1]["status"]),
        (&json!(409), &json!(404)),
        "{body}"
    );
    assert_eq!(
        body[1]["error"],
        format!("task instance {hidden} does not exist")
    );
    let (status, body) = as_user(&vic, "/external/complete", batch);
    assert_eq!(status, 403, "{body}");
    let done = json!({"lease_token": taken[0]["lease_token"], "outputs": {"ok": true}});
    let (status, body) = as_user(&wally, &format!("/external/{tid}/complete"), done);
    assert_eq!(status, 200, "{body}");
    assert_eq!(e.end(imgs)["state"], "success");
    let audit = api.get("/audit?actor=wally");
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert!(actions.contains(&"completeExternalTask"), "{audit}");
    let batch = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["action"] == "completeExternalTasks")
        .unwrap_or_else(|| panic!("the batch is audited: {audit}"));
    assert_eq!(batch["target"], "POST /api/v1/external/complete", "{batch}");
    assert_eq!(
        batch["object"],
        format!("task instances {tid}, {hidden}"),
        "the tasks it completed: {batch}"
    );
    assert!(actions.contains(&"pollExternalTasks"), "{audit}");
    let empty_polls = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "pollExternalTasks")
        .count();
    assert_eq!(
        empty_polls, 1,
        "only the poll that took a task is recorded: {audit}"
    );
}

/// Clients that hang up while their poll is being answered leave standalone's store
/// usable: a request cancelled in the middle of its transaction's BEGIN used to leave
/// SQLite's one writer connection refusing every later transaction.
#[test]
fn polls_cut_off_mid_request_leave_the_store_usable() {
    use std::io::Write;
    let e = Env::Standalone(Standalone::start());
    e.apply("name: cut\ntasks:\n- { name: a, type: noop }\n");
    let addr = e.api().base.trim_start_matches("http://").to_string();
    let body = r#"{"queues": ["nothing-here"], "worker": "w", "wait": "1s"}"#;
    let request = format!(
        "POST /api/v1/external/poll HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    for i in 0..300u64 {
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        conn.write_all(request.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_micros(i % 5 * 800));
        drop(conn);
    }
    let id = e.start("cut", "{}");
    assert_eq!(e.end(id)["state"], "success");
    assert!(
        !e.log_text().contains("non-zero transaction depth"),
        "no write was refused"
    );
}
