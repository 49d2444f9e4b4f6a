//! The example environment server (`examples/http_env/server.py`, Python, standard library
//! only) as a child process on a free loopback port, for the tests of the HTTP environment
//! protocol's client and of training against it. Killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long the server may take to print its address.
const START_WITHIN: Duration = Duration::from_secs(30);

/// A running example environment server.
pub struct PythonEnvServer {
    child: Child,
    url: String,
}

/// The example server's script in this repository.
pub fn example_env_script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/http_env/server.py"))
}

impl PythonEnvServer {
    /// Starts `python3 server.py --listen 127.0.0.1:0 <args>`, with the shared token in
    /// `REAGENT_ENV_TOKEN` when given, and waits for the address it prints. Panics (naming what
    /// the server said) if it does not start in time.
    pub fn start(args: &[&str], token: Option<&str>) -> Self {
        let mut cmd = Command::new("python3");
        cmd.arg(example_env_script())
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("REAGENT_ENV_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(token) = token {
            cmd.env("REAGENT_ENV_TOKEN", token);
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("starting python3 (the example env server): {e}"));
        let Some(stdout) = child.stdout.take() else { panic!("the server's stdout is piped") };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(START_WITHIN) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("the example env server printed no address within {START_WITHIN:?}");
            }
        };
        let Some(url) = line.trim().strip_prefix("env server listening on ") else {
            let _ = child.kill();
            panic!("the example env server did not start: {line:?}");
        };
        Self { url: url.to_string(), child }
    }

    /// Its base URL (`http://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for PythonEnvServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
