//! Dead-letter streams for operators: reading letters, replaying them onto the stream they came
//! from once their cause is fixed, and purging them (`reagent dlq`).
//!
//! ```text
//!  <stream>:dead  entry = source_id, reason, deliveries, failures, consumer, group, at_ms,
//!                         then the original entry's own fields (id, p); a p longer than
//!                         queue.dead_letter_max_payload_bytes as p:dropped_bytes, p:sha1
//!  replay: [XRANGE letter; XADD <stream> id p; XDEL letter] in one script, per letter
//! ```
//!
//! A replayed entry is a new entry of its stream (new id, no delivery or failure history). The
//! learner applies a trajectory once by id, so replaying one it had already trained is skipped
//! as a duplicate rather than trained twice.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, Value};

use super::reply::{self, RawEntry};
use super::{FIELD_ID, FIELD_PAYLOAD};
use crate::error::{ProtocolError, Result};
use crate::link::RedisLink;

/// The suffix naming a stream's dead-letter stream (see [`crate::keys::Keys::dead_letter`]).
const DEAD_SUFFIX: &str = ":dead";

/// An entry of a dead-letter stream: why it is there, and the original bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// Its id in the dead-letter stream.
    pub dead_id: String,
    /// Its id in the stream it came from.
    pub source_id: String,
    /// Why it could not be processed.
    pub reason: String,
    /// Deliveries before it was given up on.
    pub deliveries: u64,
    /// Of those, the ones that failed or were cut short (0 for an entry rejected outright).
    pub failures: u64,
    /// The consumer that gave up on it.
    pub consumer: String,
    /// The item's application id, if the entry had one.
    pub item_id: Option<String>,
    /// The original payload bytes, if the entry had a payload field and the letter kept it.
    pub payload: Option<Vec<u8>>,
    /// A payload over `queue.dead_letter_max_payload_bytes`, not kept: its size in bytes and
    /// SHA-1 (hex). Such a letter cannot be replayed.
    pub dropped_payload: Option<(u64, String)>,
}

static REPLAY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] dead-letter stream, KEYS[2] its source stream; ARGV letter ids.
-- Returns letter id, new entry id pairs; a letter missing, or without a payload, is left.
local out = {}
for i = 1, #ARGV do
  local e = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])
  if #e == 1 then
    local f, id, p = e[1][2], '', nil
    for j = 1, #f, 2 do
      if f[j] == 'id' then id = f[j + 1] elseif f[j] == 'p' then p = f[j + 1] end
    end
    if p then
      local new = redis.call('XADD', KEYS[2], '*', 'id', id, 'p', p)
      redis.call('XDEL', KEYS[1], ARGV[i])
      out[#out + 1] = ARGV[i]
      out[#out + 1] = new
    end
  end
end
return out
"#,
    )
});

fn letter(e: RawEntry) -> DeadLetter {
    let text = |f: &str| e.field(f).map(|b| String::from_utf8_lossy(b).into_owned());
    let number = |f: &str| text(f).and_then(|d| d.parse().ok()).unwrap_or(0);
    DeadLetter {
        source_id: text("source_id").unwrap_or_default(),
        reason: text("reason").unwrap_or_default(),
        deliveries: number("deliveries"),
        failures: number("failures"),
        consumer: text("consumer").unwrap_or_default(),
        item_id: text(FIELD_ID),
        payload: e.field(FIELD_PAYLOAD).map(<[u8]>::to_vec),
        dropped_payload: text(&format!("{FIELD_PAYLOAD}:dropped_bytes"))
            .and_then(|n| n.parse().ok())
            .map(|n| (n, text(&format!("{FIELD_PAYLOAD}:sha1")).unwrap_or_default())),
        dead_id: e.id,
    }
}

async fn range(
    link: &RedisLink,
    dead_stream: &str,
    (start, end): (&str, &str),
    count: usize,
) -> Result<Vec<DeadLetter>> {
    let (key, start, end) = (dead_stream.to_string(), start.to_string(), end.to_string());
    let v: Value = link
        .call("xrange", Duration::ZERO, |mut c| {
            let mut cmd = redis::cmd("XRANGE");
            cmd.arg(&key).arg(&start).arg(&end).arg("COUNT").arg(count);
            async move { cmd.query_async(&mut c).await }
        })
        .await?;
    Ok(reply::entries("xrange", v)?.into_iter().map(letter).collect())
}

/// Reads up to `count` entries of a dead-letter stream, oldest first.
pub async fn read_dead_letters(link: &RedisLink, dead_stream: &str, count: usize) -> Result<Vec<DeadLetter>> {
    range(link, dead_stream, ("-", "+"), count).await
}

/// One letter by its id in the dead-letter stream, if it is there.
pub async fn dead_letter(link: &RedisLink, dead_stream: &str, dead_id: &str) -> Result<Option<DeadLetter>> {
    check_id(dead_id)?;
    Ok(range(link, dead_stream, (dead_id, dead_id), 1).await?.into_iter().next())
}

fn check_id(id: &str) -> Result<()> {
    if reply::parse_id(id).is_none() {
        return Err(ProtocolError::InvalidArgument(format!("`{id}` is not a stream entry id (expected MS-SEQ)")));
    }
    Ok(())
}

/// Moves letters back onto the stream they came from, each atomically (appended there as a
/// new entry with the original `id` and payload, and deleted from the dead-letter stream).
/// Returns `(letter id, new entry id)` for each replayed one; ids that are not letters of this
/// stream, or letters without a payload, are left out.
pub async fn replay_dead_letters(link: &RedisLink, dead_stream: &str, ids: &[String]) -> Result<Vec<(String, String)>> {
    let source = dead_stream.strip_suffix(DEAD_SUFFIX).ok_or_else(|| {
        ProtocolError::InvalidArgument(format!("`{dead_stream}` is not a dead-letter stream (`…{DEAD_SUFFIX}`)"))
    })?;
    ids.iter().try_for_each(|id| check_id(id))?;
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(256) {
        let (dead, source) = (dead_stream.to_string(), source.to_string());
        let flat: Vec<String> = link
            .call("replay dead letters", Duration::ZERO, |mut c| {
                let (dead, source) = (dead.clone(), source.clone());
                async move {
                    let mut inv = REPLAY.prepare_invoke();
                    inv.key(&dead).key(&source).arg(chunk);
                    inv.invoke_async(&mut c).await
                }
            })
            .await?;
        out.extend(flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())));
    }
    Ok(out)
}

/// Deletes every letter of a dead-letter stream; returns how many there were.
pub async fn purge_dead_letters(link: &RedisLink, dead_stream: &str) -> Result<u64> {
    let key = dead_stream.to_string();
    let (len, _): (u64, u64) = link
        .call("purge dead letters", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move { redis::pipe().atomic().cmd("XLEN").arg(&key).cmd("DEL").arg(&key).query_async(&mut c).await }
        })
        .await?;
    Ok(len)
}
