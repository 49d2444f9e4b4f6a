//! The env-worker service: a session table, its tarpc server (authenticated, bounded), its
//! transport, and the client actors use.

pub mod auth;
mod client;
mod config;
mod server;
mod sessions;
pub mod transport;

pub use auth::Token;
pub use client::EnvClient;
pub use config::EnvWorkerConfig;
pub use server::{serve, EnvServer, ServeOptions};
pub use sessions::{Owner, SessionTable, TableConfig};
pub use transport::MAX_FRAME_BYTES;
