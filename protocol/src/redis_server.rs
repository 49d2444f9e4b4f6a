//! Starts and stops a private `redis-server` process: for tests (each on a free port in a
//! temporary directory) and for `reagent run` when no Redis URL is configured.
//!
//! Every setting goes in `D/redis.conf` (mode 0600), never on the command line, which any local
//! user can read in /proc: the server binds 127.0.0.1 only with protected mode on, and with
//! [`ServerAuth`] its users and their password hashes come from `D/users.acl` (0600) and the
//! default user is off.
//!
//! ```text
//!  start ─► pick a free port ─► write redis.conf ─► spawn redis-server D/redis.conf ─► PING until PONG
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
    /// ACL users (the default user off); `None`: the default user, without a password (tests).
    pub auth: Option<ServerAuth>,
    /// `maxmemory` in bytes, with `noeviction` (writes fail rather than keys vanishing); `None`:
    /// no limit.
    pub maxmemory: Option<u64>,
    /// SIGTERM when the thread that started the server exits ([`crate::child::stop_with_parent`]),
    /// so that an owner killed with SIGKILL does not leave its server behind; redis-server shuts
    /// down cleanly on SIGTERM. Start such a server from a thread that lives as long as the
    /// process, never from `spawn_blocking`.
    pub stop_with_parent: bool,
}

/// The users of a private server: an ACL file ([`crate::acl::acl_file`]) and the admin user's
/// password, which the start-up check authenticates with.
#[derive(Clone)]
pub struct ServerAuth {
    /// The ACL file's text (users and password hashes).
    pub acl: String,
    /// The `admin` user's password.
    pub admin_password: String,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth").field("acl_lines", &self.acl.lines().count()).finish_non_exhaustive()
    }
}

impl Default for RedisServerOptions {
    fn default() -> Self {
        Self {
            dir: None,
            appendonly: true,
            appendfsync: "always",
            start_timeout: Duration::from_secs(20),
            binary: None,
            auth: None,
            maxmemory: None,
            stop_with_parent: false,
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

    /// The server's OS process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
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

    /// `redis.conf` for this port (and `users.acl` with [`ServerAuth`]), both mode 0600.
    fn write_config(&self) -> Result<PathBuf> {
        let dir = self.dir.display();
        let mut conf = format!(
            "port {}\nbind 127.0.0.1\nprotected-mode yes\ndaemonize no\nsave \"\"\ndir \"{dir}\"\n\
             logfile \"{dir}/redis.log\"\nappendonly {}\nappendfsync {}\n",
            self.port,
            if self.options.appendonly { "yes" } else { "no" },
            self.options.appendfsync,
        );
        if let Some(bytes) = self.options.maxmemory {
            conf.push_str(&format!("maxmemory {bytes}\nmaxmemory-policy noeviction\n"));
        }
        if let Some(auth) = &self.options.auth {
            let acl = self.dir.join("users.acl");
            write_private(&acl, &auth.acl)?;
            conf.push_str(&format!("aclfile \"{}\"\n", acl.display()));
        }
        let path = self.dir.join("redis.conf");
        write_private(&path, &conf)?;
        Ok(path)
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        let binary = find_binary(self.options.binary.as_deref())?;
        let log = self.dir.join("redis.log");
        let conf = self.write_config()?;
        let mut cmd = Command::new(&binary);
        cmd.arg(&conf).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        if self.options.stop_with_parent {
            crate::child::stop_with_parent(&mut cmd);
        }
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
            if ping(self.port, self.options.auth.as_ref()) {
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

/// Writes `text` to `path` readable by this user only (0600), replacing what was there.
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| ProtocolError::Io { what: format!("writing {}", path.display()), source };
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)
}

/// One command in RESP (binary-safe: a password may hold any byte).
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// True when a server on `port` answers PING with PONG (not LOADING or an error), after
/// authenticating as `admin` when the server has users.
fn ping(port: u16, auth: Option<&ServerAuth>) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut request = Vec::new();
    if let Some(a) = auth {
        request.extend(resp(&["AUTH", "admin", &a.admin_password]));
    }
    request.extend(resp(&["PING"]));
    if s.write_all(&request).is_err() {
        return false;
    }
    let want: &[u8] = if auth.is_some() { b"+OK\r\n+PONG" } else { b"+PONG" };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64];
    while buf.len() < want.len() {
        match s.read(&mut chunk) {
            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return false,
        }
    }
    buf.starts_with(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_restarts_and_cleans_up() {
        let mut server = RedisServer::start(RedisServerOptions::default()).unwrap();
        let port = server.port();
        assert!(ping(port, None));
        server.kill();
        assert!(!ping(port, None));
        server.restart().unwrap();
        assert_eq!(server.port(), port);
        assert!(ping(port, None));
        let dir = server.dir().to_path_buf();
        drop(server);
        assert!(!ping(port, None));
        assert!(!dir.exists(), "temporary directory removed");
    }

    #[test]
    fn a_server_with_users_keeps_its_secrets_off_the_command_line_and_is_locked_down() {
        let admin = crate::acl::random_password();
        let acl = crate::acl::acl_file(&[(crate::acl::AclUser::Admin, &admin)], "*");
        let auth = ServerAuth { acl, admin_password: admin.clone() };
        let opts = RedisServerOptions { auth: Some(auth), maxmemory: Some(64 << 20), ..Default::default() };
        let server = RedisServer::start(opts).unwrap();
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.pid().unwrap())).unwrap();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        // Redis rewrites its title to "redis-server 127.0.0.1:PORT"; the password was never there.
        assert!(!cmdline.contains(&admin) && cmdline.contains("127.0.0.1"), "{cmdline}");
        for file in ["redis.conf", "users.acl"] {
            let meta = std::fs::metadata(server.dir().join(file)).unwrap();
            assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o600, "{file}");
        }
        let acl = std::fs::read_to_string(server.dir().join("users.acl")).unwrap();
        assert!(!acl.contains(&admin), "the ACL file holds hashes only");
        assert!(!ping(server.port(), None), "no unauthenticated PING");
        let query = |args: &[&str]| {
            let mut s = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut req = resp(&["AUTH", "admin", &admin]);
            req.extend(resp(args));
            s.write_all(&req).unwrap();
            let mut out = String::new();
            let mut buf = [0u8; 512];
            while !out.ends_with("\r\n") || out.matches("\r\n").count() < 2 + 2 * 2 {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "{out}");
                out.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            out
        };
        let seen = query(&["CONFIG", "GET", "bind"]) + &query(&["CONFIG", "GET", "protected-mode"]);
        assert!(seen.contains("127.0.0.1") && seen.contains("yes"), "{seen}");
        let seen = query(&["CONFIG", "GET", "maxmemory-policy"]);
        assert!(seen.contains("noeviction"), "{seen}");
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
