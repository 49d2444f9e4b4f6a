//! Starts and stops a private `redis-server` process: for tests (each on a free port in a
//! temporary directory) and for `reagent run` when no Redis URL is configured.
//!
//! ```text
//!  start ─► pick a free port ─► spawn redis-server --port P --dir D (AOF on) ─► PING until PONG
//!             ▲ port taken meanwhile: pick another (a few tries)                 (deadline)
//!  kill  ─► SIGKILL (a crash)      stop ─► SIGTERM (Redis flushes the AOF and exits)
//!  restart ─► same port, same dir: the AOF brings the data back
//! ```

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{ProtocolError, Result};

/// How to run the server.
#[derive(Debug, Clone)]
pub struct RedisServerOptions {
    /// Data directory; `None` makes a temporary one, removed on drop.
    pub dir: Option<PathBuf>,
    /// Append-only file on (`appendonly yes`).
    pub appendonly: bool,
    /// `always` (every write is on disk before it is acknowledged) or `everysec`.
    pub appendfsync: &'static str,
    /// How long to wait for the server to answer PING.
    pub start_timeout: Duration,
    /// The binary; `None` uses `$REDIS_SERVER` or `redis-server` on `PATH`.
    pub binary: Option<PathBuf>,
}

impl Default for RedisServerOptions {
    fn default() -> Self {
        Self {
            dir: None,
            appendonly: true,
            appendfsync: "always",
            start_timeout: Duration::from_secs(20),
            binary: None,
        }
    }
}

/// A running `redis-server` child process, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    options: RedisServerOptions,
}

fn server_err(msg: impl Into<String>) -> ProtocolError {
    ProtocolError::Server(msg.into())
}

/// The redis-server binary to run, or an error that says how to install it.
pub fn find_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    locate(explicit, std::env::var_os("REDIS_SERVER"), &std::env::var_os("PATH").unwrap_or_default())
}

/// [`find_binary`] over given values of `$REDIS_SERVER` and `$PATH`: the explicit binary, else
/// the override, else the first `redis-server` file on `path`.
fn locate(explicit: Option<&Path>, override_: Option<OsString>, path: &OsStr) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = override_ {
        return Ok(PathBuf::from(p));
    }
    std::env::split_paths(path)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .ok_or_else(|| server_err("redis-server was not found on PATH: install it with `sudo apt-get install redis-server` (Debian/Ubuntu) or `make setup`, or set redis.url to an existing server"))
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|source| ProtocolError::Io { what: "binding a free port".into(), source })?;
    Ok(l.local_addr().map_err(|source| ProtocolError::Io { what: "reading a bound port".into(), source })?.port())
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start(options: RedisServerOptions) -> Result<Self> {
        let (dir, temp) = match &options.dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .map_err(|source| ProtocolError::Io { what: format!("creating {}", d.display()), source })?;
                (d.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("reagent-redis-")
                    .tempdir()
                    .map_err(|source| ProtocolError::Io { what: "creating a temporary directory".into(), source })?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let mut server = Self { child: None, port: 0, dir, _temp: temp, options };
        let mut last = None;
        for _ in 0..5 {
            server.port = free_port()?;
            match server.spawn_and_wait() {
                Ok(()) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| server_err("redis-server did not start")))
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (holds the append-only file and `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills the server abruptly (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server gracefully (SIGTERM: Redis flushes its files and exits), waiting up to
    /// `timeout` before killing it.
    pub fn stop(&mut self, timeout: Duration) {
        let Some(mut child) = self.child.take() else { return };
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts the server again on the same port and directory (after `kill` or `stop`); its
    /// append-only file restores the data.
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn_and_wait()
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        let binary = find_binary(self.options.binary.as_deref())?;
        let log = self.dir.join("redis.log");
        let mut cmd = Command::new(&binary);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no", "--save", ""])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .args(["--appendonly", if self.options.appendonly { "yes" } else { "no" }])
            .args(["--appendfsync", self.options.appendfsync])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(|e| server_err(format!("could not start {}: {e}", binary.display())))?;
        let deadline = Instant::now() + self.options.start_timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(3).collect();
                return Err(server_err(format!(
                    "redis-server on port {} exited ({status}): {}",
                    self.port,
                    tail.join(" | ")
                )));
            }
            if ping(self.port) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(server_err(format!(
                    "redis-server on port {} did not answer PING within {:?}",
                    self.port, self.options.start_timeout
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// True when a server on `port` answers PING with PONG (not LOADING or an error).
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_restarts_and_cleans_up() {
        let mut server = RedisServer::start(RedisServerOptions::default()).unwrap();
        let port = server.port();
        assert!(ping(port));
        server.kill();
        assert!(!ping(port));
        server.restart().unwrap();
        assert_eq!(server.port(), port);
        assert!(ping(port));
        let dir = server.dir().to_path_buf();
        drop(server);
        assert!(!ping(port));
        assert!(!dir.exists(), "temporary directory removed");
    }

    #[test]
    fn a_missing_explicit_binary_is_named_in_the_error() {
        let opts = RedisServerOptions { binary: Some("/nonexistent/redis-server".into()), ..Default::default() };
        let err = RedisServer::start(opts).unwrap_err().to_string();
        assert!(err.contains("could not start /nonexistent/redis-server"), "{err}");
    }

    #[test]
    fn the_binary_is_the_explicit_one_then_the_override_then_the_first_on_path() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(b.path().join("redis-server"), "").unwrap();
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        let explicit = Path::new("/opt/redis/bin/redis-server");
        let over = Some(OsString::from("/usr/local/bin/redis-server"));
        assert_eq!(locate(Some(explicit), over.clone(), &path).unwrap(), explicit);
        assert_eq!(locate(None, over, &path).unwrap(), Path::new("/usr/local/bin/redis-server"));
        assert_eq!(locate(None, None, &path).unwrap(), b.path().join("redis-server"));
    }

    #[test]
    fn no_binary_on_path_says_how_to_install_it() {
        let empty = tempfile::tempdir().unwrap();
        let path = std::env::join_paths([empty.path()]).unwrap();
        let err = locate(None, None, &path).unwrap_err().to_string();
        assert!(err.contains("not found on PATH") && err.contains("apt-get install redis-server"), "{err}");
        assert!(err.contains("make setup") && err.contains("redis.url"), "{err}");
        // A directory of that name is not the binary.
        std::fs::create_dir(empty.path().join("redis-server")).unwrap();
        assert!(locate(None, None, &path).is_err());
    }
}
