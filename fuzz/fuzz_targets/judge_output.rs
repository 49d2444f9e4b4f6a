//! The judge-output parser (`rrm_worker::output`) on arbitrary replies and reasoning fields.
//!
//! Properties: parsing never panics; an accepted reply has a finite score (so the clipped
//! score is in [0, 1]) and a non-empty critique; blocks without markup re-render to a reply
//! that parses to the same blocks.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rrm_worker::output::{parse, render};

#[derive(Debug, Arbitrary)]
struct Reply<'a> {
    content: &'a str,
    reasoning: Option<&'a str>,
}

fuzz_target!(|reply: Reply<'_>| {
    let Ok(blocks) = parse(reply.content, reply.reasoning) else { return };
    assert!(blocks.score.is_finite(), "accepted a non-finite score {}", blocks.score);
    assert!((0.0..=1.0).contains(&blocks.score.clamp(0.0, 1.0)));
    assert!(!blocks.critique.trim().is_empty(), "accepted an empty critique");
    if !blocks.trace.contains('<') && !blocks.critique.contains('<') {
        let again = parse(&render(&blocks.trace, &blocks.critique, blocks.score), None);
        assert_eq!(again.as_ref(), Ok(&blocks), "the blocks do not re-render");
    }
});
