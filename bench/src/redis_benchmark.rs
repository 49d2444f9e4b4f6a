//! The baseline: `redis-benchmark` sending raw XADDs of one payload size to the server under
//! test, and the parsing of its CSV report.
//!
//! ```text
//!  redis-benchmark -u URL -n N -c 50 -P 16 --csv -x XADD <stream> * p   ◄── stdin: SIZE bytes
//!  stdout: "test","rps",…  /  "XADD <stream> * p","12167.88",…  ──► 12167.88 XADD/s
//! ```
//!
//! The payload goes in on stdin (`-x`, "read last argument from STDIN"): `-d` applies only to
//! the built-in tests, and a command-line argument is limited to 128 KiB by the kernel.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::AsyncWriteExt;

/// Requests in flight per connection (`-P`).
pub const PIPELINE: u32 = 16;
/// Parallel connections (`-c`; redis-benchmark's default).
pub const CLIENTS: u32 = 50;

/// One raw-XADD measurement.
#[derive(Debug, Clone)]
pub struct XaddRun {
    /// The redis-benchmark binary.
    pub binary: PathBuf,
    /// The server, as a redis:// URL.
    pub url: String,
    /// The stream written to.
    pub stream: String,
    /// XADDs in all (`-n`).
    pub messages: u64,
    /// Bytes of the one field's value.
    pub size: usize,
}

impl XaddRun {
    /// The arguments, payload excluded (it goes on stdin).
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = vec!["-u".into(), self.url.clone(), "-n".into(), self.messages.to_string()];
        args.extend(["-c".into(), CLIENTS.to_string(), "-P".into(), PIPELINE.to_string(), "--csv".into(), "-x".into()]);
        args.extend(["XADD".into(), self.stream.clone(), "*".into(), "p".into()]);
        args
    }

    /// The command as a person would type it, with the server's password hidden.
    pub fn display(&self) -> String {
        let endpoint = protocol::secret::host_port(&self.url);
        let args = self.args().join(" ").replace(&self.url, &format!("redis://{endpoint}"));
        format!("redis-benchmark {} < <{} bytes>", args.replace(" * ", " '*' "), self.size)
    }

    /// Runs it, feeding the payload on stdin; returns XADDs per second. Killed after
    /// `deadline`.
    pub async fn run(&self, deadline: Duration) -> Result<f64> {
        let mut child = tokio::process::Command::new(&self.binary)
            .args(self.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("could not start {}", self.binary.display()))?;
        let work = async move {
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(&vec![b'x'; self.size]).await.context("writing the payload to redis-benchmark")?;
            }
            child.wait_with_output().await.context("waiting for redis-benchmark")
        };
        let out = tokio::time::timeout(deadline, work)
            .await
            .map_err(|_| anyhow!("redis-benchmark did not finish within {deadline:?}"))??;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "redis-benchmark exited with {}: {}",
                out.status,
                tail(&format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
            );
        }
        parse_csv_rps(&stdout)
    }
}

/// The redis-benchmark binary: on `PATH`, or beside the redis-server that would be used.
pub fn find_binary() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path).map(|d| d.join("redis-benchmark")).find(|p| p.is_file());
    let beside_server = || {
        let server = protocol::redis_server::find_binary(None).ok()?;
        Some(server.parent().unwrap_or(Path::new(".")).join("redis-benchmark")).filter(|p| p.is_file())
    };
    on_path.or_else(beside_server).ok_or_else(|| {
        anyhow!(
            "redis-benchmark was not found on PATH: install it with `sudo apt-get install redis-tools` (Debian/Ubuntu)"
        )
    })
}

/// Requests per second from redis-benchmark's `--csv` output: the `rps` column of the first
/// result row. Columns are read from the right, so a test name holding commas cannot shift them.
pub fn parse_csv_rps(output: &str) -> Result<f64> {
    let row = output
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with('"') && !l.starts_with("\"test\""))
        .ok_or_else(|| anyhow!("no result row in redis-benchmark's output: {}", tail(output)))?;
    let cells: Vec<&str> = row.rsplitn(8, ',').collect();
    // rsplitn from the right: max, p99, p95, p50, min, avg, rps, test.
    let rps = cells.get(6).ok_or_else(|| anyhow!("too few columns in redis-benchmark's row: {row}"))?;
    let rps: f64 = rps
        .trim_matches('"')
        .parse()
        .with_context(|| format!("unreadable rps {rps} in redis-benchmark's row: {row}"))?;
    if !rps.is_finite() || rps <= 0.0 {
        bail!("redis-benchmark reported {rps} requests per second: {row}");
    }
    Ok(rps)
}

/// The last few hundred characters of a command's output, for errors.
fn tail(text: &str) -> String {
    let t = text.trim();
    let start = t.char_indices().rev().nth(400).map_or(0, |(i, _)| i);
    t[start..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `redis-benchmark -p 7399 -n 5000 -P 16 --csv -x XADD bs '*' p < 64k-file`
    /// (Redis 7.0.15).
    const SAMPLE: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
\"XADD bs * p\",\"12167.88\",\"14.547\",\"1.824\",\"9.231\",\"40.127\",\"44.575\",\"48.671\"\n";

    #[test]
    fn parses_the_rps_column() {
        assert_eq!(parse_csv_rps(SAMPLE).unwrap(), 12167.88);
    }

    #[test]
    fn a_comma_in_the_test_name_does_not_shift_columns() {
        let row = "\"XADD a,b * p\",\"100.5\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"";
        assert_eq!(parse_csv_rps(row).unwrap(), 100.5);
    }

    #[test]
    fn errors_quote_the_output() {
        let e = parse_csv_rps("Could not connect to Redis at 127.0.0.1:1: Connection refused").unwrap_err().to_string();
        assert!(e.contains("Connection refused"), "{e}");
        assert!(parse_csv_rps("\"XADD\",\"nan\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"").is_err());
    }

    #[test]
    fn the_displayed_command_hides_the_password() {
        let run = XaddRun {
            binary: "redis-benchmark".into(),
            url: "redis://:pw@h:1".into(),
            stream: "s".into(),
            messages: 10,
            size: 4096,
        };
        let shown = run.display();
        assert!(!shown.contains("pw") && shown.contains("redis://h:1") && shown.contains("4096 bytes"), "{shown}");
    }
}
