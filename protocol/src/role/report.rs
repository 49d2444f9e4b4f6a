//! What a role hands back when it stops: its name, how it ended and a few counters it filled,
//! printed and logged the same way for every role by the binary.

use std::fmt;

/// How a role ended (an error is the `Err` of `run_role`, not an ending).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Asked to shut down (SIGTERM, SIGINT, a cancelled token); it finished or handed back its
    /// work in progress and left.
    Shutdown,
    /// Asked to shut down before it began its work (an actor still waiting for first weights).
    ShutdownBeforeStart,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Shutdown => "shut down",
            Self::ShutdownBeforeStart => "shut down before starting",
        })
    }
}

/// A role's account of its run: the one type every `run_role` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleReport {
    /// The role: `learner`, `actor`, `rrm` or `env-worker`.
    pub role: &'static str,
    /// How it ended.
    pub ended: Ended,
    /// What it counted, in the order the role added them (names are snake_case).
    pub counters: Vec<(&'static str, u64)>,
}

impl RoleReport {
    /// A report of `role` with no counters yet.
    pub fn new(role: &'static str, ended: Ended) -> Self {
        Self { role, ended, counters: Vec::new() }
    }

    /// Adds the counter `name` (builder style).
    pub fn with(mut self, name: &'static str, value: u64) -> Self {
        self.counters.push((name, value));
        self
    }

    /// The counter `name`, if the role reported one by that name.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

/// `actor shut down: groups 3, initial 24, restarts 0`.
impl fmt::Display for RoleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.role, self.ended)?;
        for (i, (name, value)) in self.counters.iter().enumerate() {
            write!(f, "{} {name} {value}", if i == 0 { ":" } else { "," })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_found_by_name_and_printed_in_order() {
        let report = RoleReport::new("actor", Ended::Shutdown).with("groups", 3).with("restarts", 0);
        assert_eq!((report.counter("groups"), report.counter("restarts")), (Some(3), Some(0)));
        assert_eq!(report.counter("group"), None, "a name the role did not report");
        assert_eq!(report.to_string(), "actor shut down: groups 3, restarts 0");
        let early = RoleReport::new("actor", Ended::ShutdownBeforeStart);
        assert_eq!(early.to_string(), "actor shut down before starting");
    }
}
