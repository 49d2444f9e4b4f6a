//! **Test-only support** shared by the workspace's test suites; a dev-dependency, never linked
//! into a role or the binary.
//!
//! - [`wait_until`]: poll a condition with a deadline, failing with what was awaited.
//! - [`free_port`], [`refused_url`]: local ports for servers a test starts itself.
//! - [`fast_queue`]: queue settings with short blocking reads, for tests of producers and
//!   consumers.
//! - [`chat`]: a scriptable OpenAI chat-completions server (good answers, malformed ones, HTTP
//!   errors, slow, hanging and dropped requests) for the OpenAI-compatible judge's tests.
//! - [`PythonEnvServer`]: the example environment server of the HTTP environment protocol.

pub mod chat;
mod env_server;
mod net;
mod queue;
mod wait;

pub use env_server::{example_env_script, PythonEnvServer};
pub use net::{free_port, refused_url};
pub use queue::fast_queue;
pub use wait::{poll_until, wait_until, TimedOut, POLL};
