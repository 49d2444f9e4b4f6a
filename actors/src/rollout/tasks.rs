//! Drawing tasks: families and difficulties in turn from `[actor]`, and seeds that no other
//! actor process — nor this one after a restart — ever draws. Each process takes blocks of
//! [`SEED_BLOCK`] seeds from a Redis counter (`INCR reagent:{run}:actor:seed-blocks`): block b
//! holds seeds `b·SEED_BLOCK ..< (b+1)·SEED_BLOCK`, all below
//! [`episode::HELD_OUT_SEED_BASE`], so no evaluated task is trained on.
//!
//! ```text
//!  next() ─ block used up? ─ INCR seed-blocks → b ─► seeds b·2²⁰ …   (block 0 is never handed out)
//!         └► (family, difficulty) = mix[k mod |mix|], seed = next of the block
//! ```

use std::time::Duration;

use episode::HELD_OUT_SEED_BASE;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::wire::{TaskFamily, TaskSpec};
use tokio::sync::Mutex;

use crate::error::{ActorError, Result};

/// Seeds per block taken from the shared counter.
pub const SEED_BLOCK: u64 = 1 << 20;

#[derive(Debug, Default)]
struct Cursor {
    next: u64,
    end: u64,
    drawn: u64,
}

/// The tasks of one actor process, shared by its rollout slots.
#[derive(Debug)]
pub struct TaskSource {
    link: RedisLink,
    key: String,
    mix: Vec<(TaskFamily, u32)>,
    cursor: Mutex<Cursor>,
}

impl TaskSource {
    /// Tasks from `mix` (non-empty), seeds from the run's block counter on `link`.
    pub fn new(link: RedisLink, keys: &Keys, mix: Vec<(TaskFamily, u32)>) -> Self {
        Self { link, key: keys.stream("actor:seed-blocks"), mix, cursor: Mutex::default() }
    }

    /// The next task.
    pub async fn next(&self) -> Result<TaskSpec> {
        let mut cursor = self.cursor.lock().await;
        if cursor.next == cursor.end {
            let block = self.take_block().await?;
            cursor.next = block * SEED_BLOCK;
            cursor.end = cursor.next + SEED_BLOCK;
        }
        let seed = cursor.next;
        let (family, difficulty) = self.mix[(cursor.drawn % self.mix.len() as u64) as usize];
        cursor.next += 1;
        cursor.drawn += 1;
        Ok(TaskSpec { family, seed, difficulty })
    }

    async fn take_block(&self) -> Result<u64> {
        let key = &self.key;
        let block: u64 = self
            .link
            .call("incr seed blocks", Duration::ZERO, |mut c| async move {
                redis::cmd("INCR").arg(key).query_async(&mut c).await
            })
            .await?;
        if block.saturating_add(1).saturating_mul(SEED_BLOCK) > HELD_OUT_SEED_BASE {
            return Err(ActorError::Invalid {
                what: "seed block",
                detail: format!("{key} reached {block}: every training seed below the held-out ones is used"),
            });
        }
        Ok(block)
    }
}
