//! One round trip for "settle batch k, read batch k+1": the settling commands (the
//! acknowledgement script, or the forward script and the trim when it is due) and the
//! consumer's XREADGROUP go out as one pipeline, and each reply comes back on its own.
//!
//! ```text
//!  ─► EVALSHA settle … [EVALSHA trim …] XREADGROUP … STREAMS s >   one write
//!  ◄─ [settled, [trimmed], entries]                                 one read; a failed
//!                                                                   command is a value here
//! ```
//!
//! Redis runs a connection's commands in order, so batch k is settled before k+1 is read. A
//! settling command that fails (NOSCRIPT from a server that lost its scripts) fails alone: the
//! read's entries are still returned, and the caller settles again on its own.

use redis::{Cmd, Pipeline, Value};

/// The pipeline of `before` and then `read`, built once (a retry sends it again as it is: the
/// settling scripts are idempotent, see the callers). Replies of failed commands are kept.
pub(crate) fn settle_then_read(before: Vec<Cmd>, read: Cmd) -> Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for cmd in before {
        pipe.add_command(cmd);
    }
    pipe.add_command(read);
    pipe
}

/// Sends a [`settle_then_read`] pipeline; returns the settling commands' replies in order and
/// the read's, each as Redis gave it (errors included as `Value::ServerError`), so that the
/// read's entries are never dropped because a settling command failed.
pub(crate) async fn query(
    conn: &mut redis::aio::MultiplexedConnection,
    pipe: &Pipeline,
) -> redis::RedisResult<(Vec<Value>, Value)> {
    let mut replies: Vec<Value> = pipe.query_async(conn).await?;
    let read_reply = replies.pop().unwrap_or(Value::Nil);
    Ok((replies, read_reply))
}

/// The EVALSHA of `script` with `keys` and then `args` (what [`redis::Script`]'s invocation
/// sends, without its NOSCRIPT fallback: that is the caller's, outside the pipeline).
pub(crate) fn evalsha(script: &redis::Script, keys: &[&str]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    cmd
}
