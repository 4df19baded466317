//! Shared layer of shoal: domain types, the definition format, the registry and
//! the generated master/worker protocol.

pub mod access;
pub mod broker;
pub mod cluster_secret;
pub mod cluster_tls;
pub mod definition;
pub mod duration;
pub mod error;
pub mod expr;
pub mod in_process;
pub mod jsonpath;
pub mod mask;
pub mod metrics;
pub mod params;
pub mod redact;
pub mod registry;
pub mod schedule;
pub mod secret_key;
pub mod start;
pub mod trigger;
pub mod types;

pub mod proto {
    tonic::include_proto!("shoal.v1");
}

pub use error::{Error, Failure, Result};
