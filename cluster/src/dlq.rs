//! `reagent dlq`: a run's dead letters for operators — list them, show one, replay them onto
//! their stream once the cause is fixed, purge them.
//!
//! ```text
//!  reagent dlq list    [--stream rollouts|scored] [--count N]
//!  reagent dlq show    ID [--stream …]
//!  reagent dlq replay  ID… | --all [--stream …]      letter ─► its stream, as a new entry
//!  reagent dlq purge   --yes [--stream …]
//! ```
//!
//! Without `--stream` a command covers both dead-letter streams (`rollouts:dead`, `scored:dead`).
//! Replaying is safe to repeat: each letter moves once, and the learner applies a trajectory once
//! by id, so a trajectory it already trained is skipped as a duplicate.

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use protocol::codec::Codec;
use protocol::config::ReagentConfig;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::queue::{dead_letter, purge_dead_letters, read_dead_letters, replay_dead_letters, DeadLetter};
use protocol::wire::{RunId, ScoredTrajectory, Trajectory};

use crate::status::xlen;

/// What `reagent dlq` does.
#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List dead letters, oldest first: letter id, source entry, item (trajectory) id, failed
    /// and total deliveries, the consumer that gave up, and why.
    List(ListArgs),
    /// Show one letter in full, with what its payload decodes to.
    Show(ShowArgs),
    /// Move letters back onto the stream they came from, as new entries (do it once the cause
    /// is fixed). A letter moves once; a trajectory the learner already trained is skipped.
    Replay(ReplayArgs),
    /// Delete every letter (of one stream, or of both).
    Purge(PurgeArgs),
}

/// Which dead-letter stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamArg {
    /// Trajectories the RRM workers gave up on.
    Rollouts,
    /// Scored trajectories the learner gave up on.
    Scored,
}

/// `--stream`, shared by every subcommand.
#[derive(Debug, Args)]
pub struct StreamSel {
    /// Only this stream's dead letters (default: both).
    #[arg(long, value_enum)]
    pub stream: Option<StreamArg>,
}

/// `reagent dlq list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    sel: StreamSel,
    /// At most this many letters per stream.
    #[arg(long, default_value_t = 50)]
    count: usize,
}

/// `reagent dlq show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The letter's id in its dead-letter stream (as `list` prints it).
    id: String,
    #[command(flatten)]
    sel: StreamSel,
}

/// `reagent dlq replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Letter ids to replay.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    ids: Vec<String>,
    /// Replay every letter.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    sel: StreamSel,
}

/// `reagent dlq purge`.
#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Confirms the deletion (letters cannot be recovered afterwards).
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    sel: StreamSel,
}

/// The selected `(name, dead-letter stream key)`s.
fn streams(keys: &Keys, sel: &StreamSel) -> Vec<(StreamArg, String)> {
    [(StreamArg::Rollouts, keys.rollouts()), (StreamArg::Scored, keys.scored())]
        .into_iter()
        .filter(|(s, _)| sel.stream.is_none_or(|want| want == *s))
        .map(|(s, k)| (s, Keys::dead_letter(&k)))
        .collect()
}

fn name(s: StreamArg) -> &'static str {
    match s {
        StreamArg::Rollouts => "rollouts",
        StreamArg::Scored => "scored",
    }
}

fn line(l: &DeadLetter) -> String {
    format!(
        "{:<18} source {:<18} item {:<34} failed {}/{} deliveries  by {:<14} {}",
        l.dead_id,
        l.source_id,
        l.item_id.as_deref().unwrap_or("-"),
        l.failures,
        l.deliveries,
        l.consumer,
        l.reason
    )
}

/// What a letter's payload decodes to, in one line.
fn payload(stream: StreamArg, bytes: Option<&[u8]>, dropped: Option<&(u64, String)>) -> String {
    if let (None, Some((size, sha1))) = (bytes, dropped) {
        return format!(
            "not kept: {size} bytes, over queue.dead_letter_max_payload_bytes (SHA-1 {sha1}); cannot be replayed"
        );
    }
    let Some(bytes) = bytes else { return "no payload (cannot be replayed)".into() };
    let codec = Codec::default();
    let t = match stream {
        StreamArg::Rollouts => codec.decode::<Trajectory>(bytes),
        StreamArg::Scored => codec.decode::<ScoredTrajectory>(bytes).map(|s| s.trajectory),
    };
    match t {
        Ok(t) => format!(
            "{} bytes: trajectory {} by {} (task {:?} seed {}, {:?} attempt, policy {})",
            bytes.len(),
            t.id,
            t.actor_id.0,
            t.task.family,
            t.task.seed,
            t.attempt,
            t.policy_version
        ),
        Err(e) => format!("{} bytes that do not decode: {e}", bytes.len()),
    }
}

/// Runs a `reagent dlq` command; the text printed is also returned (for tests).
pub async fn run(cfg: &ReagentConfig, command: DlqCommand) -> Result<String> {
    let link = RedisLink::from_config(&cfg.redis)?;
    let run = RunId::new(cfg.run.id.clone())
        .map_err(|e| anyhow::anyhow!("run.id: expected {}, found {}", e.expected, e.found))?;
    let keys = Keys::new(&run);
    let out = match command {
        DlqCommand::List(a) => list(&link, &keys, &a).await?,
        DlqCommand::Show(a) => show(&link, &keys, &a).await?,
        DlqCommand::Replay(a) => replay(&link, &keys, &a).await?,
        DlqCommand::Purge(a) => purge(&link, &keys, &a).await?,
    };
    print!("{out}");
    Ok(out)
}

async fn list(link: &RedisLink, keys: &Keys, a: &ListArgs) -> Result<String> {
    let mut out = String::new();
    for (s, dead) in streams(keys, &a.sel) {
        let letters = read_dead_letters(link, &dead, a.count).await?;
        out.push_str(&format!("{} dead letters of {} (first {}):\n", letters.len(), name(s), a.count));
        for l in &letters {
            out.push_str(&format!("  {}\n", line(l)));
        }
    }
    Ok(out)
}

async fn show(link: &RedisLink, keys: &Keys, a: &ShowArgs) -> Result<String> {
    for (s, dead) in streams(keys, &a.sel) {
        if let Some(l) = dead_letter(link, &dead, &a.id).await? {
            return Ok(format!(
                "letter      {}\nstream      {}\nsource id   {}\nitem id     {}\ndeliveries  {} ({} failed)\nconsumer    {}\nreason      {}\npayload     {}\n",
                l.dead_id,
                name(s),
                l.source_id,
                l.item_id.as_deref().unwrap_or("-"),
                l.deliveries,
                l.failures,
                l.consumer,
                l.reason,
                payload(s, l.payload.as_deref(), l.dropped_payload.as_ref())
            ));
        }
    }
    bail!("no dead letter {} (see `reagent dlq list`)", a.id)
}

async fn replay(link: &RedisLink, keys: &Keys, a: &ReplayArgs) -> Result<String> {
    let mut out = String::new();
    let mut missing: Vec<&String> = a.ids.iter().collect();
    for (s, dead) in streams(keys, &a.sel) {
        let moved = if a.all {
            // Every letter at once: the stream is capped at queue.dead_letter_maxlen.
            let ids: Vec<String> =
                read_dead_letters(link, &dead, usize::MAX >> 1).await?.into_iter().map(|l| l.dead_id).collect();
            replay_dead_letters(link, &dead, &ids).await?
        } else {
            let moved = replay_dead_letters(link, &dead, &a.ids).await?;
            missing.retain(|id| !moved.iter().any(|(d, _)| d == *id));
            moved
        };
        out.push_str(&format!("replayed {} dead letters onto {}\n", moved.len(), name(s)));
        for (d, new) in &moved {
            out.push_str(&format!("  {d} -> {new}\n"));
        }
    }
    if !a.all && !missing.is_empty() {
        print!("{out}");
        let list: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        bail!("not replayed (no such letter, or no payload): {}", list.join(", "))
    }
    Ok(out)
}

async fn purge(link: &RedisLink, keys: &Keys, a: &PurgeArgs) -> Result<String> {
    let targets = streams(keys, &a.sel);
    if !a.yes {
        let mut n = 0;
        for (_, dead) in &targets {
            n += xlen(link, dead).await?;
        }
        bail!("refusing to delete {n} dead letters without --yes");
    }
    let mut out = String::new();
    for (s, dead) in targets {
        out.push_str(&format!("purged {} dead letters of {}\n", purge_dead_letters(link, &dead).await?, name(s)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_letter_without_its_payload_says_why_and_what_it_was() {
        let dropped = (67_108_864, "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3".to_string());
        let text = payload(StreamArg::Rollouts, None, Some(&dropped));
        assert!(text.contains("not kept: 67108864 bytes") && text.contains("dead_letter_max_payload_bytes"), "{text}");
        assert!(text.contains(&dropped.1) && text.contains("cannot be replayed"), "{text}");
        assert_eq!(payload(StreamArg::Rollouts, None, None), "no payload (cannot be replayed)");
        let garbage = payload(StreamArg::Scored, Some(&[1, 2, 3]), None);
        assert!(garbage.starts_with("3 bytes that do not decode"), "{garbage}");
    }
}
