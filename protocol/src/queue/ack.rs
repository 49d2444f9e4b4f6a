//! Acknowledging in one round trip: XACK, the entries' held markers and failure counts
//! deleted, and — every `trim_every` acknowledgements — the trim of what every group has
//! acknowledged, all in one script (atomic, like the MULTI/EXEC it replaces); and the same
//! script pipelined with the consumer's next read.
//!
//! ```text
//!  ack_and_next: ─► EVALSHA ack (XACK; HDEL held; HDEL failures; [trim]) ┐ one write,
//!                ─► XREADGROUP … BLOCK b … STREAMS s >                   ┘ one round trip
//!                ◄─ [{acked, trimmed}, entries]   (each reply on its own: one can fail alone)
//! ```
//!
//! The acknowledgement runs before the read on the server, so a consumer that acknowledges
//! batch k and reads batch k+1 waits one round trip instead of two. A server that lost its
//! scripts (restarted) answers the EVALSHA with NOSCRIPT; the read is answered all the same,
//! and the caller sends the acknowledgement again on its own ([`ack`] loads the script).

use std::sync::LazyLock;

use redis::{Cmd, Script, Value};

use super::depth::TRIM_LUA;
use super::pipelined::evalsha;
use super::progress::{failures_key, held_key};
use crate::error::{ProtocolError, Result};

/// Entries per XACK inside the script (Lua's `unpack` has a stack limit).
const IDS_PER_CALL: usize = 512;

static ACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r#"{TRIM_LUA}
-- KEYS[1] stream, KEYS[2] held hash, KEYS[3] failures hash
-- ARGV[1] group, ARGV[2] '1' to trim afterwards, ARGV[3..] entry ids
local acked = 0
for i = 3, #ARGV, {IDS_PER_CALL} do
  local j = math.min(i + {IDS_PER_CALL} - 1, #ARGV)
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, i, j))
  redis.call('HDEL', KEYS[2], unpack(ARGV, i, j))
  redis.call('HDEL', KEYS[3], unpack(ARGV, i, j))
end
local trimmed = 0
if ARGV[2] == '1' then trimmed = trim(KEYS[1]) end
return {{acked, trimmed}}
"#
    ))
});

/// What one acknowledgement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Acked {
    /// Entries that were still pending (now acknowledged).
    pub acked: u64,
    /// Entries trimmed afterwards (0 when no trim was asked for).
    pub trimmed: u64,
}

/// Acknowledges `ids` of `group` (and trims when `trim`), loading the script if the server
/// lacks it.
pub(crate) async fn ack(
    conn: &mut redis::aio::MultiplexedConnection,
    (stream, group): (&str, &str),
    ids: &[String],
    trim: bool,
) -> redis::RedisResult<Value> {
    let mut inv = ACK.prepare_invoke();
    inv.key(stream).key(held_key(stream, group)).key(failures_key(stream, group));
    inv.arg(group).arg(u8::from(trim)).arg(ids);
    inv.invoke_async(conn).await
}

/// The EVALSHA of the acknowledgement of `ids` (and the trim when `trim`), for a pipeline
/// ([`super::pipelined`]); a NOSCRIPT reply is answered by sending [`ack`] alone.
pub(crate) fn ack_cmd((stream, group): (&str, &str), ids: &[String], trim: bool) -> Cmd {
    let (held, failures) = (held_key(stream, group), failures_key(stream, group));
    let mut cmd = evalsha(&ACK, &[stream, &held, &failures]);
    cmd.arg(group).arg(u8::from(trim)).arg(ids);
    cmd
}

/// Parses the script's `{acked, trimmed}` (a server error is the caller's to report).
pub(crate) fn parse(v: &Value) -> Result<Acked> {
    let odd = |detail: String| ProtocolError::UnexpectedReply { op: "xack", detail };
    match v {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(a), Value::Int(t)] => Ok(Acked {
                acked: u64::try_from(*a).map_err(|_| odd(format!("negative count {a}")))?,
                trimmed: u64::try_from(*t).map_err(|_| odd(format!("negative count {t}")))?,
            }),
            other => Err(odd(format!("expected two counts, got {other:?}"))),
        },
        other => Err(odd(format!("expected two counts, got {other:?}"))),
    }
}
