//! Wall-clock time as the wire carries it: milliseconds since the Unix epoch. One function, so
//! every timestamp a role writes (a trajectory's timing, a publish, a delivery) reads the same
//! clock the same way.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch now; 0 if the system clock is set before it.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_after_2020_and_does_not_go_back_between_calls() {
        let (a, b) = (unix_ms(), unix_ms());
        // 2020-01-01T00:00:00Z in milliseconds.
        assert!(a > 1_577_836_800_000, "{a}");
        assert!(b >= a);
    }
}
