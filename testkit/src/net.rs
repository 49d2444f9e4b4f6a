//! Local ports for servers a test starts itself (bind `127.0.0.1:0`, never a fixed port).

use std::net::TcpListener;

/// A port free on 127.0.0.1 a moment ago (bound and released), for a server that must be told
/// its port rather than handed a listener (a redis-server's `tls-port`). Another process may
/// take it in between: prefer passing a bound listener where the server accepts one.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A URL where nothing listens (a port bound and released): connections are refused.
pub fn refused_url() -> std::io::Result<String> {
    Ok(format!("http://127.0.0.1:{}", free_port()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_can_be_bound_and_a_refused_url_refuses() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        drop(TcpListener::bind(("127.0.0.1", port)).expect("the port is free"));
        let url = refused_url().unwrap();
        let addr = url.strip_prefix("http://").unwrap();
        let err = std::net::TcpStream::connect(addr).expect_err("nothing listens");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    }
}
