//! Multi-role integration tests for Reagent: real `redis-server` processes, real OS processes
//! for the roles, real TCP. The tests live in `tests/tests/`; this library holds what they and
//! the helper binaries share.

use protocol::error::InvalidValue;
use protocol::wire::{QueueItem, Validate};
use serde::{Deserialize, Serialize};

/// The item the `queue-worker` helper binary produces and forwards: an id and some bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeItem {
    /// Unique id, counted at the end of a test.
    pub id: u64,
    /// Filler bytes.
    pub body: Vec<u8>,
}

impl QueueItem for ProbeItem {
    fn item_id(&self) -> String {
        self.id.to_string()
    }
}

impl Validate for ProbeItem {
    fn validate(&self) -> Result<(), InvalidValue> {
        Ok(())
    }
}
