//! The agent action parser (`env_workers::action`) on arbitrary messages.
//!
//! Properties: parsing never panics; a parsed action, rendered back into its tag, parses to
//! the same action; a tool call's arguments split without panicking.

#![no_main]

use env_workers::action::{parse, parse_args, Action};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|message: &str| {
    let Ok(action) = parse(message) else { return };
    let rendered = match &action {
        Action::Tool(call) => {
            let _ = parse_args(&call.raw_args);
            format!("<tool>{call}</tool>")
        }
        Action::Answer(text) => format!("<answer>{text}</answer>"),
        Action::Say(text) => text.clone(),
    };
    assert_eq!(parse(&rendered).as_ref(), Ok(&action), "{rendered:?} does not re-parse to {action:?}");
});
