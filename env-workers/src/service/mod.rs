//! The env-worker service: a session table, its tarpc server, and the client actors use.

mod client;
mod server;
mod sessions;

pub use client::EnvClient;
pub use server::{serve, EnvServer, MAX_FRAME_BYTES};
pub use sessions::{SessionTable, TableConfig};
