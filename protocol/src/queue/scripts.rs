//! The server-side scripts behind forward and dead-lettering (move entries this consumer owns
//! to another stream and acknowledge them, atomically) and behind [`Consumer::keep`] (renew
//! the lease on entries this consumer owns).
//!
//! [`Consumer::keep`]: super::Consumer::keep
//!
//! Redis runs a script as one transaction (like MULTI/EXEC: nothing interleaves, and a crash
//! applies all of it or none), so a consumer killed mid-forward can neither lose an entry nor
//! forward it twice. The script adds what MULTI/EXEC cannot express: each entry is moved only
//! if it is still pending *for this consumer*. A slow consumer whose entry was reclaimed by
//! another therefore cannot forward it a second time.

use std::sync::LazyLock;

use redis::{Cmd, ErrorKind, Script, ServerErrorKind};

use super::pipelined::evalsha;
use super::progress::{failures_key, held_key};

static MOVE_OWNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] source stream, KEYS[2] destination stream, KEYS[3] and KEYS[4] the source's
-- held-marker and failure-count hashes (progress.rs), whose fields of a moved entry go
-- ARGV: group, consumer, the destination's approximate MAXLEN (0: none), the most bytes of a
--       kept field's value (0: no limit; a longer value is replaced by <field>:dropped_bytes and
--       <field>:sha1), then per entry: source id, keep (1: append the source entry's own
--       fields, as dead letters do), n, followed by n field/value items
local group, consumer, maxlen, maxkeep = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local moved = {}
local i = 5
while i <= #ARGV do
  local id = ARGV[i]
  local keep = ARGV[i + 1] == '1'
  local n = tonumber(ARGV[i + 2])
  local fields = {}
  for j = 1, n do fields[j] = ARGV[i + 2 + j] end
  i = i + 3 + n
  local owned = redis.call('XPENDING', KEYS[1], group, id, id, 1, consumer)
  if #owned == 1 then
    if keep then
      local original = redis.call('XRANGE', KEYS[1], id, id)
      if #original == 1 then
        local kept = original[1][2]
        for k = 1, #kept, 2 do
          local name, value = kept[k], kept[k + 1]
          if maxkeep > 0 and #value > maxkeep then
            fields[#fields + 1] = name .. ':dropped_bytes'
            fields[#fields + 1] = tostring(#value)
            fields[#fields + 1] = name .. ':sha1'
            fields[#fields + 1] = redis.sha1hex(value)
          else
            fields[#fields + 1] = name
            fields[#fields + 1] = value
          end
        end
      end
    end
    if maxlen > 0 then
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', unpack(fields))
    else
      redis.call('XADD', KEYS[2], '*', unpack(fields))
    end
    redis.call('XACK', KEYS[1], group, id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('HDEL', KEYS[4], id)
    moved[#moved + 1] = id
  end
end
return moved
"#,
    )
});

static KEEP_OWNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] stream; ARGV: group, consumer, then entry ids
local group, consumer = ARGV[1], ARGV[2]
local kept = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local owned = redis.call('XPENDING', KEYS[1], group, id, id, 1, consumer)
  if #owned == 1 then
    redis.call('XCLAIM', KEYS[1], group, consumer, 0, id, 'JUSTID')
    kept[#kept + 1] = id
  end
end
return kept
"#,
    )
});

/// One entry to move: its id in the source stream and the fields of the new entry.
pub(crate) struct Move {
    pub source_id: String,
    /// Append the source entry's own fields (its original bytes) after `fields`.
    pub keep_original: bool,
    pub fields: Vec<(String, Vec<u8>)>,
}

/// The EVALSHA of the move script (the destination capped at about `maxlen` entries, 0 for
/// no cap; a kept original value longer than `max_keep` bytes replaced by its size and SHA-1,
/// 0 for no limit), for a pipeline ([`super::pipelined`]) or for [`move_owned`]. Re-running it
/// is harmless: an entry already moved is no longer pending for `consumer` and is skipped.
pub(crate) fn move_cmd(
    source: &str,
    destination: &str,
    (group, consumer): (&str, &str),
    (maxlen, max_keep): (u64, u64),
    moves: &[Move],
) -> Cmd {
    let (held, failures) = (held_key(source, group), failures_key(source, group));
    let mut cmd = evalsha(&MOVE_OWNED, &[source, destination, &held, &failures]);
    cmd.arg(group).arg(consumer).arg(maxlen).arg(max_keep);
    for m in moves {
        cmd.arg(&m.source_id).arg(u8::from(m.keep_original)).arg(m.fields.len() * 2);
        for (k, v) in &m.fields {
            cmd.arg(k).arg(v.as_slice());
        }
    }
    cmd
}

/// Runs [`move_cmd`] (loading the script first if the server lacks it); returns the source
/// ids that were moved (those still owned).
pub(crate) async fn move_owned(
    conn: &mut redis::aio::MultiplexedConnection,
    cmd: &Cmd,
) -> redis::RedisResult<Vec<String>> {
    match cmd.query_async(conn).await {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            MOVE_OWNED.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        other => other,
    }
}

/// Resets the idle time of the entries (of `ids`) still pending for `consumer`, without
/// counting a delivery; returns those ids.
pub(crate) async fn keep_owned(
    conn: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    group: &str,
    consumer: &str,
    ids: &[String],
) -> redis::RedisResult<Vec<String>> {
    let mut inv = KEEP_OWNED.prepare_invoke();
    inv.key(stream).arg(group).arg(consumer);
    for id in ids {
        inv.arg(id);
    }
    inv.invoke_async(conn).await
}
