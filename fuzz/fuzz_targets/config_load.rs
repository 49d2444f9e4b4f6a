//! The config loader (`ReagentConfig::from_toml_str`: a TOML job over the embedded defaults,
//! validated, as `reagent config show` loads a file) on arbitrary text.
//!
//! Properties: loading never panics; an accepted config, rendered as TOML (the run directory's
//! `config.toml`), loads again and renders identically.

#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::config::ReagentConfig;

fuzz_target!(|text: &str| {
    let Ok(config) = ReagentConfig::from_toml_str(text) else { return };
    let rendered = config.to_toml();
    let again = ReagentConfig::from_toml_str(&rendered).expect("a rendered config loads");
    assert_eq!(again.to_toml(), rendered, "the rendered config does not load to itself");
});
