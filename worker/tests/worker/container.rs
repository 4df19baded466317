//! Container tasks run by a real worker through a real podman, on an image built here
//! from a busybox-static rootfs (`podman import`; no registry is reachable from the test
//! machines, so every task runs with `pull: never`).
//!
//! Where podman cannot run a container on the machine, each test prints `SKIP:` with the
//! reason found at run time (podman's own error) and passes. Sandboxes without the
//! capabilities podman's defaults need (CAP_SYS_RESOURCE for its ulimits, a pure cgroup v2
//! for crun) get a `containers.conf` written here: `runc` as the OCI runtime and ulimits
//! within the sandbox's; the worker is then pointed at a wrapper that sets
//! `CONTAINERS_CONF`, so the worker's own argv is the one used everywhere.

use super::*;
use serde_json::{Value, json};
use std::process::Command;
use std::sync::OnceLock;

const IMAGE: &str = "localhost/shoal-test-busybox";
const APPLETS: [&str; 10] = [
    "sh", "echo", "cat", "sleep", "env", "pwd", "true", "false", "printf", "ls",
];

/// The runtime the worker is given, or why there is none.
fn podman() -> Result<&'static str, String> {
    static RUNTIME: OnceLock<Result<String, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(prepare)
        .as_ref()
        .map(String::as_str)
        .map_err(Clone::clone)
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Builds the test image if missing and finds a way podman runs it here.
fn prepare() -> Result<String, String> {
    run(Command::new("podman").arg("--version"))
        .map_err(|e| format!("podman is not installed ({e}); scripts/test installs it"))?;
    if run(Command::new("podman").args(["image", "exists", IMAGE])).is_err() {
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .ok_or("busybox is not installed (apt-get install busybox-static)")?;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("rootfs/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(busybox, bin.join("busybox")).unwrap();
        for applet in APPLETS {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
        }
        let tar = dir.path().join("rootfs.tar");
        run(Command::new("tar")
            .arg("-C")
            .arg(dir.path().join("rootfs"))
            .arg("-cf")
            .arg(&tar)
            .arg("."))?;
        run(Command::new("podman").arg("import").arg(&tar).arg(IMAGE))?;
    }
    let probe = ["run", "--rm", "--pull=never", IMAGE, "true"];
    let plain = match run(Command::new("podman").args(probe)) {
        Ok(_) => return Ok("podman".into()),
        Err(e) => e,
    };
    // This sandbox's limits: runc (crun refuses hybrid cgroups), ulimits it may set.
    let conf = std::env::temp_dir().join("shoal-test-containers.conf");
    std::fs::write(
        &conf,
        "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1000:1000\"]\n\
         [engine]\nruntime = \"runc\"\n",
    )
    .unwrap();
    let tweaked = run(Command::new("podman").env("CONTAINERS_CONF", &conf).args(probe))
        .map_err(|e| {
            format!("podman cannot run a container here: `podman run {IMAGE} true`: {plain}; with runc and lower ulimits: {e}")
        });
    tweaked?;
    let wrapper = std::env::temp_dir().join("shoal-test-podman");
    let script = format!(
        "#!/bin/sh\nCONTAINERS_CONF={} exec podman \"$@\"\n",
        conf.display()
    );
    let part = wrapper.with_extension(format!("{}", std::process::id()));
    std::fs::write(&part, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&part, &wrapper).unwrap();
    Ok(wrapper.display().to_string())
}

macro_rules! podman_or_skip {
    () => {
        match podman() {
            Ok(p) => p,
            Err(why) => {
                eprintln!("SKIP: {why}");
                return;
            }
        }
    };
}

fn container_task(id: i64, container: Value, master: &str) -> TaskSpec {
    let definition = json!({"name": format!("t{id}"), "type": "container", "container": container});
    TaskSpec {
        task_instance_id: id,
        workflow_instance_id: 300,
        attempt: 1,
        name: format!("t{id}"),
        task_type: "container".into(),
        definition_json: definition.to_string(),
        params: HashMap::new(),
        master_addr: master.into(),
        owner_epoch: 1,
        tenant: String::new(),
        ..Default::default()
    }
}

async fn worker_with(runtime: &str) -> Setup {
    launch(Launch {
        container_runtime: Some(runtime.into()),
        ..Launch::default()
    })
    .await
}

fn exists(runtime: &str, name: &str) -> bool {
    Command::new(runtime)
        .args(["container", "exists", name])
        .status()
        .unwrap()
        .success()
}

#[tokio::test]
async fn a_container_task_runs_its_argv_with_env_volume_and_workdir() {
    let runtime = podman_or_skip!();
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = worker_with(runtime).await;
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("in.txt"), "from the host\n").unwrap();
    let t = container_task(
        3101,
        json!({
            "image": IMAGE,
            "command": ["sh", "-c", "pwd; cat in.txt; echo \"A=$A\"; echo '${setValue(done=yes)}'; echo err >&2", "ignored $0"],
            "env": {"A": "one two; $(no shell)"},
            "volumes": [format!("{}:/data:ro", host.path().display())],
            "workdir": "/data",
            "pull": "never",
        }),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [3101]);
    let events = master.until_done(3101).await;
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{events:?}\n{log}"
    );
    assert!(
        log.starts_with("/data\nfrom the host\nA=one two; $(no shell)\n"),
        "{log}"
    );
    assert!(log.contains("err\n"), "{log}");
    assert_eq!(
        events[1].output.get("done").map(String::as_str),
        Some("yes")
    );
    assert!(!exists(runtime, "shoal-3101"), "--rm removed it");
}

#[tokio::test]
async fn a_container_s_exit_code_is_the_task_s() {
    let runtime = podman_or_skip!();
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = worker_with(runtime).await;
    // A string command is run by the image's sh -c.
    let t = container_task(
        3102,
        json!({"image": IMAGE, "command": "echo before; exit 7", "pull": "never"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [3102]);
    let events = master.until_done(3102).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Failure]
    );
    assert_eq!(events[1].exit_code, 7);
    assert_eq!(events[1].message, "container exited with code 7");
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert!(log.starts_with("before\n"), "{log}");

    // An image that is not there, with pull: never, is the runtime's failure (125).
    let missing = container_task(
        3103,
        json!({"image": "localhost/shoal-no-such-image", "command": ["true"], "pull": "never"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![missing.clone()]).await.accepted, [3103]);
    let events = master.until_done(3103).await;
    assert_eq!(events.last().unwrap().exit_code, 125, "{events:?}");
    let log = String::from_utf8(w.read_log(&missing, 0, 0).await.unwrap()).unwrap();
    assert!(log.contains("shoal-no-such-image"), "{log}");
}

#[tokio::test]
async fn a_killed_or_timed_out_container_is_removed() {
    let runtime = podman_or_skip!();
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = worker_with(runtime).await;
    let t = container_task(
        3104,
        json!({"image": IMAGE, "command": "echo up; sleep 300", "pull": "never"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [3104]);
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !w
        .read_log(&t, 0, 0)
        .await
        .is_some_and(|l| l.starts_with(b"up\n"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "container never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(exists(runtime, "shoal-3104"));
    assert!(w.kill(&t).await);
    let events = tokio::time::timeout(Duration::from_secs(40), master.until_done(3104))
        .await
        .unwrap();
    assert_eq!(kinds(&events), [TaskEventKind::Killed]);
    assert!(!exists(runtime, "shoal-3104"), "the container was removed");

    let mut timed = container_task(
        3105,
        json!({"image": IMAGE, "command": ["sleep", "300"], "pull": "never"}),
        &master.addr,
    );
    let mut def: Value = serde_json::from_str(&timed.definition_json).unwrap();
    def["timeout"] = json!("2s");
    def["timeout_strategy"] = json!("fail");
    timed.definition_json = def.to_string();
    assert_eq!(w.dispatch(vec![timed]).await.accepted, [3105]);
    let events = tokio::time::timeout(Duration::from_secs(40), master.until_done(3105))
        .await
        .unwrap();
    let end = events.last().unwrap();
    assert_eq!(end.kind, TaskEventKind::Failure as i32, "{events:?}");
    assert_eq!(end.message, "timed out after 2s");
    assert!(!exists(runtime, "shoal-3105"), "the container was removed");
}

#[tokio::test]
async fn without_a_runtime_the_task_fails_saying_so() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = worker_with("/nonexistent/podman").await;
    let t = container_task(3106, json!({"image": IMAGE}), &master.addr);
    assert_eq!(w.dispatch(vec![t]).await.accepted, [3106]);
    let events = master.until_done(3106).await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, TaskEventKind::Failure as i32);
    assert!(
        end.message.contains(
            "container runtime '/nonexistent/podman' (--container-runtime) is not on this worker"
        ),
        "{}",
        end.message
    );
}

#[tokio::test]
async fn a_container_s_script_reads_the_task_s_values_from_its_environment() {
    let runtime = podman_or_skip!();
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = worker_with(runtime).await;
    // As the master writes a `sh -c` script that uses a value from outside
    // (`echo ${p}` with p a start parameter that is not plain).
    let mut t = container_task(
        3107,
        json!({
            "image": IMAGE,
            "command": "printf '%s|%s|%s|%s\\n' \"${SHOAL_PARAM_p}\" \"$SHOAL_PARAM_q\" \"$p\" \"$CONTAINERS_CONF\"; test ! -e pwned",
            // Set in the container only: given to the runtime, it would break it.
            "env": {"SHOAL_PARAM_q": "the env wins", "CONTAINERS_CONF": "/nonexistent.conf"},
            "pull": "never",
        }),
        &master.addr,
    );
    let hostile = "$(touch pwned); `touch pwned` 'a\"b";
    t.params = [
        ("SHOAL_PARAM_p", hostile),
        ("SHOAL_PARAM_q", "the value loses"),
        ("p", "own name: not passed"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [3107]);
    let events = master.until_done(3107).await;
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{log}"
    );
    assert_eq!(log, format!("{hostile}|the env wins||/nonexistent.conf\n"));
    assert!(
        !w.dir
            .path()
            .join("data/running/container-3107.env")
            .exists(),
        "the env file is removed"
    );
}

#[tokio::test]
async fn a_worker_mounts_only_what_its_volume_dirs_hold() {
    let runtime = podman_or_skip!();
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(allowed.path().join("in.txt"), "allowed\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), allowed.path().join("out")).unwrap();
    let a = allowed.path().display().to_string();
    let o = outside.path().display().to_string();
    let mut w = launch(Launch {
        container_runtime: Some(runtime.into()),
        container_volume_dirs: vec![allowed.path().to_path_buf()],
        single_team: false,
        ..Launch::default()
    })
    .await;
    let addr = master.addr.clone();
    let task = |id: i64, image: &str, volume: String| {
        container_task(
            id,
            json!({"image": image, "command": ["cat", "/v/in.txt"], "volumes": [volume], "pull": "never"}),
            &addr,
        )
    };
    let refused = [
        (
            3110,
            IMAGE,
            format!("{o}:/v"),
            format!("'{o}' is outside this worker's --container-volume-dir"),
        ),
        (
            3111,
            IMAGE,
            format!("{a}/out:/v"),
            "is outside this worker's".into(),
        ),
        (3112, IMAGE, format!("{a}/../x:/v"), "holds '..'".into()),
        (
            3113,
            IMAGE,
            "/etc:v".into(),
            "use /host/path:/container/path".into(),
        ),
        (
            3114,
            "--privileged",
            format!("{a}:/v"),
            "'--privileged' is not an image name".into(),
        ),
        (
            3117,
            "oci-archive:/tmp/x.tar",
            format!("{a}:/v"),
            "is not an image name".into(),
        ),
    ];
    for (id, image, volume, want) in refused {
        assert_eq!(
            w.dispatch(vec![task(id, image, volume)]).await.accepted,
            [id]
        );
        let end = master.until_done(id).await.pop().unwrap();
        assert_eq!(end.kind, TaskEventKind::Failure as i32, "{id}");
        assert!(end.message.contains(&want), "{id}: {}", end.message);
        assert!(!exists(runtime, &format!("shoal-{id}")), "{id} never ran");
    }
    let t = task(3115, IMAGE, format!("{a}:/v:ro"));
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [3115]);
    let events = master.until_done(3115).await;
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{log}"
    );
    assert_eq!(log, "allowed\n");

    // A worker of several teams with no volume dir mounts nothing.
    let mut w = launch(Launch {
        container_runtime: Some(runtime.into()),
        single_team: false,
        ..Launch::default()
    })
    .await;
    assert_eq!(
        w.dispatch(vec![task(3116, IMAGE, format!("{a}:/v"))])
            .await
            .accepted,
        [3116]
    );
    let end = master.until_done(3116).await.pop().unwrap();
    assert!(
        end.message
            .contains("this worker mounts no host path (start it with --container-volume-dir"),
        "{}",
        end.message
    );
}
