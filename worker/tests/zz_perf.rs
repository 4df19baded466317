use shoal_common::proto::master_server::{Master, MasterServer};
use shoal_common::proto::worker_client::WorkerClient;
use shoal_common::proto::*;
use shoal_common::registry::Registry;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

struct M(mpsc::UnboundedSender<(TaskEvent, Instant)>);
#[tonic::async_trait]
impl Master for M {
    async fn report_events(&self, r: Request<ReportEventsRequest>) -> Result<Response<ReportEventsResponse>, Status> {
        let now = Instant::now();
        let r = r.into_inner();
        let acked = r.events.iter().map(|e| e.seq).collect();
        for e in r.events { let _ = self.0.send((e, now)); }
        Ok(Response::new(ReportEventsResponse { acked }))
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore]
async fn perf() {
    let kind = std::env::var("PERF_TYPE").unwrap_or("shell".into());
    let n: i64 = std::env::var("PERF_N").ok().and_then(|s| s.parse().ok()).unwrap_or(5000);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let maddr = listener.local_addr().unwrap().to_string();
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(tonic::transport::Server::builder().add_service(MasterServer::new(M(tx))).serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))));
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let w = shoal_worker::start(shoal_worker::WorkerConfig { listen: "127.0.0.1:0".parse().unwrap(), advertise_host: "127.0.0.1".into(), groups: vec![], slots: 100000, data_dir: dir.path().into() }, Registry::local(), shutdown.clone()).await.unwrap();
    let mut c = WorkerClient::connect(format!("http://{}", w.addr)).await.unwrap();
    // latency: one at a time
    let mut lat = vec![];
    for i in 0..200i64 {
        let spec = TaskSpec { task_instance_id: 1_000_000 + i, workflow_instance_id: 1, attempt: 1, task_type: kind.clone(), definition_json: format!(r#"{{"type":"{kind}","command":"true"}}"#), master_addr: maddr.clone(), ..Default::default() };
        let t0 = Instant::now();
        c.dispatch(DispatchRequest { tasks: vec![spec] }).await.unwrap();
        loop { let (e, at) = rx.recv().await.unwrap(); if e.kind == TaskEventKind::Running as i32 { lat.push(at - t0); } if e.kind != TaskEventKind::Running as i32 { break } }
    }
    lat.sort();
    println!("dispatch->running p50 {:?} p99 {:?}", lat[100], lat[198]);
    let t0 = Instant::now();
    let mut done = 0;
    let mut i = 0i64;
    while i < n {
        let tasks: Vec<_> = (i..(i + 100).min(n)).map(|id| TaskSpec { task_instance_id: id, workflow_instance_id: 2, attempt: 1, task_type: kind.clone(), definition_json: format!(r#"{{"type":"{kind}","command":"true"}}"#), master_addr: maddr.clone(), ..Default::default() }).collect();
        i += tasks.len() as i64;
        let r = c.dispatch(DispatchRequest { tasks }).await.unwrap().into_inner();
        assert!(r.rejected.is_empty());
        while let Ok((e, _)) = rx.try_recv() { if e.kind == TaskEventKind::Success as i32 { done += 1 } }
    }
    while done < n { let (e, _) = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.unwrap().unwrap(); if e.kind == TaskEventKind::Success as i32 { done += 1 } }
    let el = t0.elapsed();
    println!("{n} {kind} tasks in {el:?}: {:.0}/s", n as f64 / el.as_secs_f64());
    shutdown.cancel();
    w.join().await.unwrap();
}
