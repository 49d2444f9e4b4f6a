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

/// Queue settings for process tests: small batches, short blocks and a short idle timeout, so
/// a killed process's entries are reclaimed quickly.
pub fn probe_settings() -> protocol::queue::QueueSettings {
    protocol::queue::QueueSettings {
        read_count: 16,
        block: std::time::Duration::from_millis(50),
        claim_idle: std::time::Duration::from_millis(400),
        ..protocol::queue::QueueSettings::default()
    }
}
