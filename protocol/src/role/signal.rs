//! SIGTERM and SIGINT (Ctrl-C) as a role process's shutdown: the first one cancels the token
//! every part of the role watches, and the role leaves gracefully (docs/architecture.md section 5).

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// Cancels `shutdown` on the first SIGTERM or SIGINT this process receives. The handlers are
/// installed before this returns (so a signal sent right after is not lost), and stay for the
/// life of the process: a second signal does not kill it mid-leave. Stops watching if
/// `shutdown` is cancelled some other way. Needs a Tokio runtime.
pub fn cancel_on_signal(shutdown: CancellationToken) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down gracefully"),
            _ = interrupt.recv() => tracing::info!("SIGINT: shutting down gracefully"),
            _ = shutdown.cancelled() => return,
        }
        shutdown.cancel();
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Sends `sig` to this test process with the real `kill` program.
    fn kill_self(sig: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{sig}"), std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{sig} failed: {status}");
    }

    #[tokio::test]
    async fn sigterm_and_sigint_each_cancel_the_shutdown_token() {
        for sig in ["TERM", "INT"] {
            let shutdown = CancellationToken::new();
            cancel_on_signal(shutdown.clone()).unwrap();
            assert!(!shutdown.is_cancelled(), "nothing cancels it before a signal");
            kill_self(sig);
            tokio::time::timeout(Duration::from_secs(10), shutdown.cancelled())
                .await
                .unwrap_or_else(|_| panic!("SIG{sig} did not cancel the token"));
        }
    }
}
