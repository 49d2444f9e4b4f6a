//! Writes the sample dataset (`sample.jsonl`) and its reference episodes in the OpenAI chat
//! format (`sample_episodes.jsonl`) into a directory, `examples/dataset` unless one is given:
//!
//! ```text
//! cargo run -p env-workers --example dataset_sample [DIR]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args().nth(1).map_or_else(|| PathBuf::from("examples/dataset"), PathBuf::from);
    match env_workers::families::dataset::sample::write(&dir) {
        Ok((tasks, episodes)) => {
            println!("wrote {} and {}", tasks.display(), episodes.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("could not write the sample dataset into {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
