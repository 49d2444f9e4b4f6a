//! Values several commands take on the command line, as clap types: the feedback mode, the
//! device and the log format. Each command's own options live beside its `run` in its module; the `reagent`
//! binary puts the commands together.

use clap::ValueEnum;
use protocol::config::LogFormat;

/// A feedback mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FeedbackArg {
    /// The environment's outcome only.
    Outcome,
    /// Reagent-C: critique-guided refinement.
    Critique,
    /// Reagent-R: the judge's score in the reward.
    Score,
    /// Reagent-U: both.
    Unified,
}

impl From<FeedbackArg> for protocol::wire::FeedbackMode {
    fn from(a: FeedbackArg) -> Self {
        match a {
            FeedbackArg::Outcome => Self::Outcome,
            FeedbackArg::Critique => Self::Critique,
            FeedbackArg::Score => Self::Score,
            FeedbackArg::Unified => Self::Unified,
        }
    }
}

/// `--device`: where a command that trains in this process runs its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    /// The first CUDA device when libtorch sees one, else the CPU.
    Auto,
    /// The CPU (f32).
    Cpu,
    /// The first CUDA device (bf16 compute, fp32 masters); an error when libtorch sees none.
    Cuda,
}

impl DeviceArg {
    /// The device, logged; `cuda` without a CUDA device is an error naming `--device`.
    pub fn resolve(self) -> anyhow::Result<tch::Device> {
        let choice = match self {
            Self::Auto => policy::device::DeviceChoice::Auto,
            Self::Cpu => policy::device::DeviceChoice::Cpu,
            Self::Cuda => policy::device::DeviceChoice::Cuda,
        };
        Ok(policy::device::resolve(choice, "--device")?)
    }
}

/// `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// Human-readable lines.
    Text,
    /// JSON lines, one object per event.
    Json,
}

impl From<LogFormatArg> for LogFormat {
    fn from(f: LogFormatArg) -> Self {
        match f {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }
    }
}

/// Parses `words` (the options alone, without a command name) into one command's options, as
/// the binary would: for the modules' own tests of their flags.
#[cfg(test)]
pub(crate) fn parse<A: clap::Args>(words: &[&str]) -> Result<A, clap::Error> {
    use clap::Parser;
    #[derive(Parser)]
    struct One<A: clap::Args> {
        #[command(flatten)]
        args: A,
    }
    One::<A>::try_parse_from(std::iter::once("reagent").chain(words.iter().copied())).map(|o| o.args)
}
