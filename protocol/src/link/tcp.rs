//! A plain-TCP Redis connection with a large read buffer.
//!
//! redis-rs reads replies through tokio-util's framed reader, whose buffer holds 8 KiB: a
//! consumer's XREADGROUP of 128 entries of 4 KiB (512 KiB of reply) took one `recv` per entry,
//! about 110,000 system calls for 100,000 messages (`strace -c` of `reagent bench queue`). A
//! buffered reader under the framed one takes what the socket has, up to [`READ_BUFFER`], in
//! one call, and hands it on from memory.
//!
//! ```text
//!  socket ──recv (≤ 256 KiB)──► BufReader ──memcpy (≤ 8 KiB)──► framed reader ──► reply parser
//! ```
//!
//! Only `redis://` over TCP is built here; TLS (`rediss://`) and Unix sockets keep redis-rs's
//! own connection (the caller falls back). The socket takes the client's TCP settings
//! (TCP_NODELAY, keep-alive) as redis-rs would apply them; the handshake (AUTH, SELECT, HELLO)
//! is redis-rs's own.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisResult};
use tokio::io::BufReader;
use tokio::net::TcpStream;

/// Bytes the buffered reader takes from the socket per call at most.
pub const READ_BUFFER: usize = 256 * 1024;

/// A multiplexed connection over a buffered TCP stream to `info`'s server, or `None` when the
/// address is not plain TCP (TLS, Unix socket: the caller uses the client's own connection).
/// The connection's driver runs on a task of its own, which ends when the connection and its
/// clones are dropped.
pub async fn connect(info: &ConnectionInfo, cfg: &AsyncConnectionConfig) -> Option<RedisResult<MultiplexedConnection>> {
    let ConnectionAddr::Tcp(host, port) = info.addr() else {
        return None;
    };
    Some(open(host, *port, info, cfg).await)
}

async fn open(
    host: &str,
    port: u16,
    info: &ConnectionInfo,
    cfg: &AsyncConnectionConfig,
) -> RedisResult<MultiplexedConnection> {
    let tcp = TcpStream::connect((host, port)).await?;
    let settings = info.tcp_settings();
    tcp.set_nodelay(settings.nodelay())?;
    if let Some(keepalive) = settings.keepalive() {
        socket2::SockRef::from(&tcp).set_tcp_keepalive(keepalive)?;
    }
    let stream = BufReader::with_capacity(READ_BUFFER, tcp);
    let (conn, driver) = MultiplexedConnection::new_with_config(info.redis_settings(), stream, cfg.clone()).await?;
    tokio::spawn(driver);
    Ok(conn)
}
