//! Draws a searchqa task from a seed: a [`World`], a chain of `difficulty + 1` relations from an
//! entity named in the question to the answer, the corpus with its distractors, the BM25 index,
//! and the reference searches (`"<entity> <keyword>"`, one per hop).
//!
//! ```text
//!  "In which city was the founder of Acme Corp born?"      (2 hops)
//!   Acme Corp ─founded_by─► Ada Brandt ─born_in─► Brightwater
//!   search("Acme Corp founded") → Acme Corp's passage names Ada Brandt
//!   search("Ada Brandt born")   → Ada Brandt's passage names Brightwater → answer
//! ```
//!
//! A draw is kept only when each reference search ranks its hop's passage in the top 3 and no
//! later hop's passage (so the reference never finds a hop early); otherwise the next draw of
//! the same seed is tried. Rejections are rare; the bound only guards the loop.

use super::bm25::Bm25;
use super::corpus;
use super::world::{Relation, World};
use crate::rng::Rng;
use crate::scoring::normalize;

/// Decorrelates this family's draws from other families' for the same seed.
pub const SALT: u64 = 0x7365_6172_6368;

/// Passages a search returns.
pub const TOP_K: usize = 3;

const ATTEMPTS: u64 = 64;

/// One generated task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The knowledge base.
    pub world: World,
    /// The corpus; passage `e` describes entity `e`, mentions follow.
    pub passages: Vec<String>,
    /// The BM25 index over `passages`.
    pub index: Bm25,
    /// The chain's entities: the one the question names, each hop's object, the answer last.
    pub chain: Vec<usize>,
    /// The chain's relations, one per hop.
    pub relations: Vec<Relation>,
    /// The question (first user message).
    pub question: String,
    /// The answer: the last entity's name.
    pub answer: String,
    /// The reference search per hop.
    pub queries: Vec<String>,
    /// Every entity's normalised name (for the verifier's fabrication check).
    pub names: Vec<String>,
}

impl Task {
    /// The passage holding hop `k`'s fact (that of the chain's entity `k`).
    pub fn hop_passage(&self, k: usize) -> Option<usize> {
        self.chain.get(k).copied().filter(|_| k < self.relations.len())
    }

    /// How many hops.
    pub fn hops(&self) -> usize {
        self.relations.len()
    }
}

/// The task for `seed` at `difficulty` (clamped to 1..=3): `difficulty + 1` hops.
pub fn generate(seed: u64, difficulty: u32) -> Task {
    let d = difficulty.clamp(1, 3);
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        let mut rng = Rng::new(seed ^ attempt.wrapping_mul(0xA24B_AED4_963E_E407), SALT.wrapping_add(u64::from(d)));
        let task = draw(&mut rng, d);
        if reference_ranks(&task) {
            return task;
        }
        last = Some(task);
    }
    last.unwrap_or_else(|| draw(&mut Rng::new(seed, SALT), d))
}

fn draw(rng: &mut Rng, d: u32) -> Task {
    let hops = d as usize + 1;
    let world = World::generate(rng, d);
    let (chain, relations) = walk(rng, &world, hops);
    let mut text = world.name(chain.first().copied().unwrap_or(0)).to_string();
    for r in relations.iter().take(relations.len().saturating_sub(1)) {
        text = r.phrase(&text);
    }
    let question = relations.last().map_or_else(String::new, |r| r.question(&text));
    let passages = corpus::build(rng, &world, &chain[..hops.min(chain.len())], 2 + 2 * d as usize);
    let index = Bm25::new(&passages);
    let queries = relations.iter().zip(&chain).map(|(r, &e)| format!("{} {}", world.name(e), r.keyword())).collect();
    let answer = world.name(chain.last().copied().unwrap_or(0)).to_string();
    let names = world.entities.iter().map(|e| normalize(&e.name)).collect();
    Task { world, passages, index, chain, relations, question, answer, queries, names }
}

/// A random chain of `hops` relations from an entity whose kind is deep enough.
fn walk(rng: &mut Rng, world: &World, hops: usize) -> (Vec<usize>, Vec<Relation>) {
    let starts: Vec<usize> = (0..world.entities.len()).filter(|&e| world.entities[e].kind.depth() >= hops).collect();
    let mut e = if starts.is_empty() { 0 } else { starts[rng.below(starts.len())] };
    let (mut chain, mut relations) = (vec![e], Vec::new());
    for k in 0..hops {
        let Some(x) = world.get(e) else { break };
        let ok: Vec<Relation> =
            x.kind.relations().iter().copied().filter(|r| r.object().depth() + k + 1 >= hops).collect();
        if ok.is_empty() {
            break;
        }
        let r = ok[rng.below(ok.len())];
        let Some(next) = x.fact(r) else { break };
        relations.push(r);
        chain.push(next);
        e = next;
    }
    (chain, relations)
}

/// Whether every reference search finds its hop's passage, and no later hop's, in the top 3.
pub fn reference_ranks(task: &Task) -> bool {
    let hops: Vec<usize> = (0..task.hops()).filter_map(|k| task.hop_passage(k)).collect();
    hops.len() == task.hops()
        && task.queries.iter().enumerate().all(|(k, q)| {
            let top: Vec<usize> = task.index.top_k(q, TOP_K).into_iter().map(|(d, _)| d).collect();
            top.contains(&hops[k]) && !hops[k + 1..].iter().any(|h| top.contains(h))
        })
}
