//! The weight-sync actor: watches the weight store, and when a version newer than the one the
//! policy serves is out, fetches the newest (skipping those in between; the store verifies
//! every chunk's hash) and hands it to the policy actor, whose thread swaps it in between
//! batches. The time from noticing a version to serving it is the weight-sync latency.
//!
//! ```text
//!  Tick ─► WeightWatcher::next_version(slice) ── none ──────────────────────────► Tick
//!                 │ some v (or a retry pending)
//!                 ▼
//!     policy serves ≥ v? ─ yes ─► Tick
//!                 │ no
//!     fetch_newer_than(served) ─► Swap ─► observe latency ─► Tick   (error: log, retry next Tick)
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::metrics::ACTOR_WEIGHT_SYNC_SECONDS;
use protocol::weights::{WeightStore, WeightWatcher};
use protocol::wire::PolicyVersion;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::error::{ActorError, Result};
use crate::handle::Handle;
use crate::inference::PolicyMsg;
use crate::stats::Stats;

/// The weight-sync actor (field-less; its state is [`WeightSyncState`]).
pub struct WeightSync;

/// What the weight-sync actor is started with.
#[derive(Clone)]
pub struct WeightSyncArgs {
    /// Where versions are published.
    pub store: WeightStore,
    /// The policy actor to hand them to.
    pub policy: Handle<PolicyMsg>,
    /// Longest one watch lasts before the actor takes its other messages.
    pub slice: Duration,
    /// Deadline of a call to the policy actor (a swap waits for the batch in progress).
    pub call_timeout: Duration,
    /// The process's counters.
    pub stats: Arc<Stats>,
}

/// The weight-sync actor's messages.
#[derive(Debug)]
pub enum WeightSyncMsg {
    /// Watch for a new version for one slice, sync if there is one, and tick again.
    Tick,
}

/// The weight-sync actor's state.
pub struct WeightSyncState {
    args: WeightSyncArgs,
    watcher: WeightWatcher,
    retry: bool,
}

impl Actor for WeightSync {
    type Msg = WeightSyncMsg;
    type State = WeightSyncState;
    type Arguments = WeightSyncArgs;

    async fn pre_start(
        &self,
        _: ActorRef<WeightSyncMsg>,
        args: WeightSyncArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let watcher = args.store.subscribe(None).await;
        Ok(WeightSyncState { args, watcher, retry: true })
    }

    async fn post_start(&self, myself: ActorRef<WeightSyncMsg>, _: &mut Self::State) -> Result<(), ActorProcessingErr> {
        myself.cast(WeightSyncMsg::Tick)?;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<WeightSyncMsg>,
        _: WeightSyncMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let noticed = state.watcher.next_version(state.args.slice).await?;
        if noticed.is_some() || state.retry {
            let started = Instant::now();
            match sync(&state.args).await {
                Ok(Some(version)) => {
                    let latency = started.elapsed();
                    ACTOR_WEIGHT_SYNC_SECONDS.observe(latency.as_secs_f64());
                    state.args.stats.weight_swaps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::info!(%version, latency_ms = latency.as_millis() as u64, "serving new weights");
                    state.retry = false;
                }
                Ok(None) => state.retry = false,
                Err(e) => {
                    tracing::warn!(error = %e, "weight sync failed; retrying at the next tick");
                    state.retry = true;
                }
            }
        }
        // A drained actor refuses further messages; that is the end of the loop, not an error.
        let _ = myself.cast(WeightSyncMsg::Tick);
        Ok(())
    }
}

/// Brings the policy to the newest version; the version swapped in, if any.
async fn sync(args: &WeightSyncArgs) -> Result<Option<PolicyVersion>> {
    let served = args.policy.call("version", PolicyMsg::Version, args.call_timeout).await?;
    let Some(set) = args.store.fetch_newer_than(Some(served)).await? else { return Ok(None) };
    let version = set.version();
    let swapped = args
        .policy
        .call("swap weights", |reply| PolicyMsg::Swap(Box::new(set), reply), args.call_timeout)
        .await?
        .map_err(ActorError::Inference)?;
    debug_assert_eq!(swapped, version);
    Ok(Some(swapped))
}
