//! Errors as people read them: the chain of causes on one line, without the repeats that
//! appear when an error's message already quotes its source (as the protocol crate's do).

/// `outer: cause: root cause`, skipping any cause whose text the line already holds.
pub fn describe(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose message quotes its source, as the protocol crate's do.
    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "redis at h:1: ping failed: {}", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_already_quoted_are_not_repeated() {
        let io = std::io::Error::other("connection refused");
        let e = anyhow::Error::new(Quoting(io)).context("checking redis");
        assert_eq!(describe(&e), "checking redis: redis at h:1: ping failed: connection refused");
    }
}
