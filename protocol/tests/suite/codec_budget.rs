//! The codec's decoded-memory budget: a valid trajectory of empty turns (five bytes each on the
//! wire, about a hundred in memory) is refused instead of expanding ~20×, and the peak memory
//! the attempt allocates stays within twice the budget; real trajectories still decode.
//!
//! Peak memory is measured by a counting global allocator in this test binary, so the tests
//! run one at a time behind a lock.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use protocol::codec::{Codec, DEFAULT_MAX_EXPANSION, MIN_BUDGET_BYTES};
use protocol::error::CodecError;
use protocol::wire::*;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes allocated at the peak of `f`, above what was live before it.
fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let out = f();
    (out, PEAK.load(Ordering::SeqCst) - before)
}

fn trajectory(turns: Vec<Turn>) -> Trajectory {
    Trajectory {
        run_id: RunId::new("budget").unwrap(),
        id: TrajectoryId(7),
        actor_id: ActorId("actor-0".into()),
        task: TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 },
        group_id: GroupId(3),
        attempt: Attempt::Initial,
        policy_version: PolicyVersion(1),
        episode: Episode::Text(turns),
        outcome_reward: 1.0,
        timing: Timing { started_at_ms: 1, finished_at_ms: 2, generation_ms: 1, env_ms: 1 },
    }
}

fn empty_turn() -> Turn {
    Turn { role: Role::Tool, text: String::new(), token_ids: vec![], logprobs: vec![], loss_mask: vec![] }
}

#[test]
fn a_trajectory_of_empty_turns_is_refused_without_expanding() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let codec = Codec::new(64 << 20);
    let bytes = codec.encode(&trajectory(vec![empty_turn(); 200_000])).unwrap();
    let size = bytes.len();
    let (result, peak) = peak_during(|| codec.decode::<Trajectory>(&bytes));
    let limit = size as u64 * DEFAULT_MAX_EXPANSION + MIN_BUDGET_BYTES;
    assert_eq!(result, Err(CodecError::Expands { size: size as u64, limit }));
    // Without the budget the decoded Vec<Turn> alone is ~20× the payload (and grows by doubling).
    let bound = 2 * limit as usize;
    assert!(peak <= bound, "decoding {size} bytes peaked at {peak} bytes, over {bound}");
    // The same payload with a budget that allows it decodes, and shows what was avoided.
    let (wide, unbounded_peak) = peak_during(|| codec.with_max_expansion(64).decode::<Trajectory>(&bytes));
    assert!(wide.is_ok());
    assert!(unbounded_peak > 10 * size, "the unbounded decode takes {unbounded_peak} bytes for {size}");
    eprintln!("{size} bytes of empty turns: refused at a peak of {peak} bytes; unbounded {unbounded_peak} bytes");
}

#[test]
fn real_trajectories_decode_within_the_default_budget() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let codec = Codec::default();
    let mut turns = vec![Turn {
        role: Role::User,
        text: "What is 12 * 7?".into(),
        token_ids: (0..40).collect(),
        logprobs: vec![],
        loss_mask: vec![false; 40],
    }];
    for t in 0..16u32 {
        // Small token ids: four bytes each on the wire since format 2, as in memory.
        let n = 300;
        turns.push(Turn {
            role: Role::Agent,
            text: "x".repeat(n),
            token_ids: (0..n as u32).map(|i| (i + t) % 200).collect(),
            logprobs: vec![-0.5; n],
            loss_mask: vec![true; n],
        });
        turns.push(Turn {
            role: Role::Tool,
            text: String::new(),
            token_ids: vec![],
            logprobs: vec![],
            loss_mask: vec![],
        });
    }
    let t = trajectory(turns);
    let bytes = codec.encode(&t).unwrap();
    assert_eq!(codec.decode::<Trajectory>(&bytes).unwrap(), t);
    let control = Trajectory {
        episode: Episode::Control(vec![
            ControlStep { observation: vec![0.0; 4], action: 1, logprob: -0.7, reward: 1.0 };
            500
        ]),
        ..trajectory(vec![])
    };
    let bytes = codec.encode(&control).unwrap();
    assert_eq!(codec.decode::<Trajectory>(&bytes).unwrap(), control);
}

#[test]
fn a_short_list_of_empty_strings_fits_the_floor_and_a_long_one_does_not() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let codec = Codec::new(16 << 20);
    let few = codec.encode(&vec![String::new(); 100]).unwrap();
    assert_eq!(codec.decode::<Vec<String>>(&few).unwrap().len(), 100);
    let many = codec.encode(&vec![String::new(); 1_000_000]).unwrap();
    assert!(matches!(codec.decode::<Vec<String>>(&many), Err(CodecError::Expands { .. })));
}
