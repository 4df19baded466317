//! Calls between nodes that share a process (`shoal standalone`'s master, worker and API)
//! without the network. A node serving gRPC registers its routes under the address it
//! advertises; a channel to that address then calls them directly: the same services,
//! the same cluster-secret check, the same protobuf messages, without a TCP connection
//! and HTTP/2 framing between two halves of one process. A channel looks its address up
//! on every call, so a node that starts serving after the channel was made is found, and
//! one that stopped answers `UNAVAILABLE` as a stopped remote node would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codegen::{Service, StdError, http};
use tonic::service::Routes;
use tonic::transport::Channel;

/// The gRPC routes served in this process, by advertised address. Cloning is cheap.
#[derive(Clone, Default)]
pub struct InProcess(Arc<Mutex<HashMap<String, Routes>>>);

impl InProcess {
    /// Serves `routes` to the channels of this process that call `addr`, until the
    /// returned guard is dropped.
    pub fn serve(&self, addr: &str, routes: Routes) -> Served {
        self.table().insert(addr.to_string(), routes);
        Served {
            table: self.clone(),
            addr: addr.to_string(),
        }
    }

    fn get(&self, addr: &str) -> Option<Routes> {
        self.table().get(addr).cloned()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Routes>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Keeps an address served in process; dropping it ends that.
pub struct Served {
    table: InProcess,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.table.table().remove(&self.addr);
    }
}

/// A channel to one node: its routes when they are served in this process, the network
/// otherwise.
#[derive(Clone)]
pub struct Transport {
    addr: Arc<str>,
    local: Option<InProcess>,
    net: Channel,
    /// What `poll_ready` found for the next call (a channel must be polled ready before
    /// each call, the routes need not).
    ready: Option<Routes>,
}

impl Transport {
    pub(crate) fn new(addr: &str, local: Option<InProcess>, net: Channel) -> Transport {
        Transport {
            addr: addr.into(),
            local,
            net,
            ready: None,
        }
    }
}

impl Service<http::Request<Body>> for Transport {
    type Response = http::Response<Body>;
    type Error = StdError;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<http::Response<Body>, StdError>> + Send + 'static>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StdError>> {
        self.ready = self.local.as_ref().and_then(|l| l.get(&self.addr));
        if self.ready.is_some() {
            return Poll::Ready(Ok(()));
        }
        self.net.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        match self.ready.take() {
            Some(mut routes) => {
                let answer = routes.call(request);
                Box::pin(async move { answer.await.map_err(|never| match never {}) })
            }
            None => {
                let answer = self.net.call(request);
                Box::pin(async move { answer.await.map_err(Into::into) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cluster_secret::ClusterSecret;
    use crate::proto::master_client::MasterClient;
    use crate::proto::master_server::{Master, MasterServer};
    use crate::proto::{
        ControlRequest, ControlResponse, ReportEventsRequest, ReportEventsResponse, TaskEvent,
    };
    use tonic::service::Routes;
    use tonic::{Code, Request, Response, Status};

    /// A master that acks every event.
    struct AckAll;

    #[tonic::async_trait]
    impl Master for AckAll {
        async fn report_events(
            &self,
            request: Request<ReportEventsRequest>,
        ) -> Result<Response<ReportEventsResponse>, Status> {
            let acked = request.into_inner().events.iter().map(|e| e.seq).collect();
            Ok(Response::new(ReportEventsResponse { acked }))
        }

        async fn control(
            &self,
            _: Request<ControlRequest>,
        ) -> Result<Response<ControlResponse>, Status> {
            Err(Status::unimplemented("not used"))
        }
    }

    async fn report(secret: &ClusterSecret, addr: &str) -> Result<Vec<u64>, Status> {
        let net = secret.endpoint(addr).unwrap().connect_lazy();
        let mut client = MasterClient::new(secret.channel(addr, net));
        let events = vec![TaskEvent {
            seq: 7,
            ..TaskEvent::default()
        }];
        let request = ReportEventsRequest {
            events,
            ..ReportEventsRequest::default()
        };
        Ok(client.report_events(request).await?.into_inner().acked)
    }

    #[tokio::test]
    async fn a_node_served_in_process_is_called_without_the_network_and_checks_the_secret() {
        // Nothing listens on port 1: an answer can only come from the process itself.
        let addr = "127.0.0.1:1";
        let secret = ClusterSecret::random().unwrap().in_process();
        let service = MasterServer::with_interceptor(AckAll, secret.guard());
        let served = secret.serve_in_process(addr, Routes::new(service));
        assert_eq!(report(&secret, addr).await.unwrap(), vec![7]);

        // A node guarded by another cluster's secret refuses the call, in process too.
        drop(served);
        let stranger = ClusterSecret::random().unwrap();
        let guarded = MasterServer::with_interceptor(AckAll, stranger.guard());
        let served = secret.serve_in_process(addr, Routes::new(guarded));
        let refused = report(&secret, addr).await.unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused}");

        // A node that stopped serving is called over the network, where nobody answers.
        drop(served);
        let gone = report(&secret, addr).await.unwrap_err();
        assert_eq!(gone.code(), Code::Unavailable, "{gone}");
    }

    #[tokio::test]
    async fn credentials_not_made_for_one_process_serve_nothing_in_it() {
        let secret = ClusterSecret::random().unwrap();
        let service = MasterServer::with_interceptor(AckAll, secret.guard());
        assert!(
            secret
                .serve_in_process("127.0.0.1:1", Routes::new(service))
                .is_none()
        );
        let gone = report(&secret, "127.0.0.1:1").await.unwrap_err();
        assert_eq!(gone.code(), Code::Unavailable, "{gone}");
    }
}
