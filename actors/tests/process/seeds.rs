//! Task seeds: blocks from a Redis counter, so two processes (or one restarted) never draw the
//! same seed, and every seed lies below the held-out ones.

use std::collections::HashSet;

use actors::rollout::{TaskSource, SEED_BLOCK};
use episode::HELD_OUT_SEED_BASE;
use protocol::wire::TaskFamily;

use crate::common::Harness;

#[tokio::test]
async fn two_processes_draw_disjoint_seeds_below_the_held_out_ones_in_the_configured_mix() {
    let h = Harness::new();
    let mix = vec![(TaskFamily::Math, 1), (TaskFamily::Webnav, 3)];
    let a = TaskSource::new(h.link.clone(), &h.keys, mix.clone());
    let b = TaskSource::new(h.link.clone(), &h.keys, mix);
    let mut seen = HashSet::new();
    for i in 0..20 {
        let (x, y) = (a.next().await.unwrap(), b.next().await.unwrap());
        assert_eq!((x.family, x.difficulty), if i % 2 == 0 { (TaskFamily::Math, 1) } else { (TaskFamily::Webnav, 3) });
        for s in [x, y] {
            assert!(s.seed >= SEED_BLOCK && s.seed < HELD_OUT_SEED_BASE, "{}", s.seed);
            assert!(seen.insert(s.seed), "seed {} drawn twice", s.seed);
        }
    }
    assert_ne!(a.next().await.unwrap().seed / SEED_BLOCK, b.next().await.unwrap().seed / SEED_BLOCK);
}
