//! Hosts on one machine: a network namespace per host, each with its own address on one
//! private subnet, joined by a bridge that lives in a namespace of its own. The test process
//! joins the subnet too (a veth in the root namespace), so it can read Redis as an observer.
//!
//! ```text
//!   root namespace (the test, 10.X.Y.254) ── rgmh<pid>r ──┐
//!   rgmh<pid>-redis   (10.X.Y.1)  eth0 ─── rgmh<pid>s0 ───┤
//!   rgmh<pid>-learner (10.X.Y.2)  eth0 ─── rgmh<pid>s1 ───┼── br0 in rgmh<pid>-switch
//!   …                                                     │
//!   a cut: `ip -n rgmh<pid>-switch link set rgmh<pid>sN down` (the host's eth0 loses carrier)
//! ```
//!
//! Names carry the test's pid, so parallel runs never clash; the subnet is derived from the pid
//! and checked against the root namespace's routes. Dropping [`Net`] deletes every namespace
//! (which destroys their veths) and the root veth; namespaces left by a run that was killed
//! outright are removed by the next run (their pid is gone).

use std::net::Ipv4Addr;
use std::process::Command;

/// Runs `ip args…`; the error names the command and what it printed.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("`ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`ip {}` failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn ip_output(args: &[&str]) -> String {
    Command::new("ip").args(args).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
}

/// Why hosts cannot be made on this machine, if they cannot: tries what [`Net::create`] needs
/// (a namespace, a veth pair moved into it, a bridge) and undoes it.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); not running as root".into());
    }
    if let Err(e) = Command::new("ip").arg("-V").output() {
        return Some(format!("the `ip` command (Debian package iproute2) is not available: {e}"));
    }
    let pid = std::process::id();
    let (ns, a, b) = (format!("rgmh{pid}-probe"), format!("rgmh{pid}pa"), format!("rgmh{pid}pb"));
    let result = (|| {
        ip(&["netns", "add", &ns])?;
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b])?;
        ip(&["link", "set", &b, "netns", &ns])?;
        ip(&["-n", &ns, "link", "add", "br0", "type", "bridge"])
    })();
    let _ = ip(&["link", "del", &a]);
    let _ = ip(&["netns", "del", &ns]);
    result.err().map(|e| format!("cannot create network namespaces and veth pairs here: {e}"))
}

/// Deletes namespaces (and root veths) of earlier runs whose process is gone.
fn remove_leftovers() {
    for line in ip_output(&["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name.strip_prefix("rgmh").and_then(|r| r.split('-').next()) else { continue };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
            let _ = ip(&["link", "del", &format!("rgmh{pid}r")]);
        }
    }
}

/// One host: a namespace with an address, and the bridge port that can be cut.
#[derive(Debug, Clone)]
pub struct Host {
    /// The namespace's name (`ip netns exec <ns> …`).
    pub ns: String,
    /// Its address on the subnet.
    pub addr: Ipv4Addr,
    /// Its veth's end on the bridge (in the switch namespace).
    port: String,
}

/// The hosts of one test run; everything is removed on drop.
#[derive(Debug)]
pub struct Net {
    hosts: Vec<(String, Host)>,
    switch: String,
    root_if: String,
    /// The test process's own address on the subnet.
    pub observer: Ipv4Addr,
}

impl Net {
    /// Creates one host per name (addresses 10.X.Y.1, .2, … in order) and the observer.
    pub fn create(names: &[&str]) -> Result<Self, String> {
        remove_leftovers();
        let pid = std::process::id();
        let (x, mut y) = (64 + ((pid >> 8) % 128) as u8, (pid & 0xff) as u8);
        let taken = ip_output(&["-4", "route", "show"]) + &ip_output(&["-4", "-o", "addr", "show"]);
        while taken.contains(&format!("10.{x}.{y}.")) {
            y = y.wrapping_add(1);
        }
        let mut net = Self {
            hosts: Vec::new(),
            switch: format!("rgmh{pid}-switch"),
            root_if: format!("rgmh{pid}r"),
            observer: Ipv4Addr::new(10, x, y, 254),
        };
        ip(&["netns", "add", &net.switch])?;
        ip(&["-n", &net.switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &net.switch, "link", "set", "br0", "up"])?;
        // The observer: a veth from the root namespace into the bridge.
        let root_peer = format!("rgmh{pid}o");
        ip(&["link", "add", &net.root_if, "type", "veth", "peer", "name", &root_peer])?;
        net.plug(&root_peer)?;
        ip(&["addr", "add", &format!("{}/24", net.observer), "dev", &net.root_if])?;
        ip(&["link", "set", &net.root_if, "up"])?;
        for (i, name) in names.iter().enumerate() {
            let host = Host {
                ns: format!("rgmh{pid}-{name}"),
                addr: Ipv4Addr::new(10, x, y, i as u8 + 1),
                port: format!("rgmh{pid}s{i}"),
            };
            let inside = format!("rgmh{pid}h{i}");
            ip(&["netns", "add", &host.ns])?;
            net.hosts.push((name.to_string(), host.clone()));
            ip(&["link", "add", &host.port, "type", "veth", "peer", "name", &inside])?;
            net.plug(&host.port)?;
            ip(&["link", "set", &inside, "netns", &host.ns])?;
            ip(&["-n", &host.ns, "link", "set", &inside, "name", "eth0"])?;
            ip(&["-n", &host.ns, "addr", "add", &format!("{}/24", host.addr), "dev", "eth0"])?;
            ip(&["-n", &host.ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &host.ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    /// Moves `port` into the switch namespace and attaches it to the bridge, up.
    fn plug(&self, port: &str) -> Result<(), String> {
        ip(&["link", "set", port, "netns", &self.switch])?;
        ip(&["-n", &self.switch, "link", "set", port, "master", "br0"])?;
        ip(&["-n", &self.switch, "link", "set", port, "up"])
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> &Host {
        &self.hosts.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no host {name}")).1
    }

    /// Cuts (`up = false`) or restores the host's link to the bridge.
    pub fn set_link(&self, name: &str, up: bool) -> Result<(), String> {
        let port = self.host(name).port.clone();
        ip(&["-n", &self.switch, "link", "set", &port, if up { "up" } else { "down" }])
    }

    /// `ip netns exec <host's namespace> <program>`: a command that runs on the host.
    pub fn command(&self, name: &str, program: &std::path::Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.host(name).ns]).arg(program);
        cmd
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for (_, h) in &self.hosts {
            let _ = ip(&["netns", "del", &h.ns]);
        }
        let _ = ip(&["netns", "del", &self.switch]);
        let _ = ip(&["link", "del", &self.root_if]);
    }
}
