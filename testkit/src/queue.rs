//! Queue settings for tests: short blocking reads so a test's consumers notice new entries and
//! stops quickly, and a lease long enough that a stalled scheduler does not reclaim work in
//! progress.

use std::time::Duration;

use protocol::queue::QueueSettings;

/// Short reads (50 ms blocks, 16 entries), frequent trims, a 20 s backpressure wait, and a 2 s
/// lease (`claim_idle`).
///
/// The lease is the one thing not made short: a consumer's entries are reclaimed (by another
/// consumer, or redelivered to itself) once they sit unacknowledged longer than `claim_idle`,
/// and on a CI machine with two busy cores a task can be descheduled for several hundred
/// milliseconds between reading a batch and acknowledging it. At 300–400 ms (what the test
/// suites used before) such a stall redelivered entries the test counted as delivered once.
/// Tests of reclaiming itself wait the lease out with a deadline; a test that needs a shorter
/// one sets it and says why.
pub fn fast_queue() -> QueueSettings {
    QueueSettings {
        read_count: 16,
        block: Duration::from_millis(50),
        claim_idle: Duration::from_secs(2),
        max_deliveries: 5,
        trim_every: 32,
        backpressure_timeout: Duration::from_secs(20),
        ..QueueSettings::default()
    }
}
