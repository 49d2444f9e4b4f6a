//! What every Reagent role shares: wire types, the codec, typed config, Redis Streams queues,
//! the weight store, key names, logging set-up and metric names (docs/architecture.md sections 1 and 2, CODE_STYLE.md).
//!
//! ```text
//!  wire ── codec ──► queue (producer, consumer, forward, dead letters) ──► Redis Streams
//!                └─► weights (manifest + chunks + BLAKE3, pub/sub notify) ──► Redis keys
//!  config (typed, validated)   keys (namespaced by run)   telemetry   metrics
//!  role (RoleReport, signals, redis.url)   http (each role's /metrics /healthz /readyz)
//! ```

pub mod acl;
pub mod child;
pub mod clock;
pub mod codec;
pub mod config;
pub mod critique;
pub mod error;
pub mod http;
pub mod keys;
pub mod link;
pub mod metrics;
pub mod queue;
pub mod redis_auth;
pub mod redis_replica;
pub mod redis_server;
pub mod rng;
pub mod role;
pub mod rpc;
pub mod secret;
pub mod telemetry;
pub mod weights;
pub mod wire;

pub use error::{ProtocolError, Result};
