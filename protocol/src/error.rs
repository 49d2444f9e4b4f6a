//! The protocol crate's error type: one enum, lowercase messages that name what was wrong.

use std::time::Duration;

/// A value that is not of the expected form: names the field, the form expected and what came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: expected {expected}, found {found}")]
pub struct InvalidValue {
    /// The field or config key, dotted (`queue.high_water_mark`).
    pub field: String,
    /// The expected form, in words.
    pub expected: String,
    /// What was there.
    pub found: String,
}

impl InvalidValue {
    /// Builds one.
    pub fn new(field: impl Into<String>, expected: impl Into<String>, found: impl Into<String>) -> Self {
        Self { field: field.into(), expected: expected.into(), found: found.into() }
    }
}

/// Why a payload could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// No bytes at all.
    #[error("empty payload: no format-version byte")]
    Empty,
    /// A format version this build does not read.
    #[error("unknown format version {found} (this build reads version {expected})")]
    UnknownVersion {
        /// The byte found.
        found: u8,
        /// The one this build reads.
        expected: u8,
    },
    /// Over the configured maximum.
    #[error("payload of {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// The size seen (or a lower bound of it).
        size: u64,
        /// The limit.
        max: u64,
    },
    /// It would decode into more memory than its size allows (many empty elements).
    #[error("payload of {size} bytes would decode into more than {limit} bytes of memory; refused")]
    Expands {
        /// The payload's size.
        size: u64,
        /// The decoded-memory budget it got.
        limit: u64,
    },
    /// The bytes do not decode as the expected type.
    #[error("malformed payload: {0}")]
    Malformed(String),
    /// It decoded but its content is out of range.
    #[error("invalid payload: {0}")]
    Invalid(#[from] InvalidValue),
}

/// Everything that can go wrong in the protocol crate.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// Encoding or decoding.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A Redis command failed and retrying within its deadline did not help.
    #[error("redis at {endpoint}: {op} failed: {source}")]
    Redis {
        /// Where.
        endpoint: String,
        /// Which operation.
        op: &'static str,
        /// The client's error.
        #[source]
        source: redis::RedisError,
    },
    /// A Redis operation (including its retries) ran past its deadline.
    #[error("redis at {endpoint}: {op} did not complete within {after:?}")]
    Timeout {
        /// Where.
        endpoint: String,
        /// Which operation.
        op: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// A producer waited at the high-water mark longer than its deadline.
    #[error("stream {stream} held {backlog} undelivered entries (high-water mark {high_water_mark}) for longer than {waited:?}; are its consumers running?")]
    Backpressure {
        /// The stream.
        stream: String,
        /// Its backlog (entries not yet delivered to a consumer) when the producer gave up.
        backlog: u64,
        /// The configured mark.
        high_water_mark: u64,
        /// How long the producer waited.
        waited: Duration,
    },
    /// Redis answered with something this code does not understand.
    #[error("unexpected reply to {op}: {detail}")]
    UnexpectedReply {
        /// Which operation.
        op: &'static str,
        /// What was odd.
        detail: String,
    },
    /// A weight version failed its checksum or is incomplete.
    #[error("weights {version}: {detail}")]
    CorruptWeights {
        /// Which version.
        version: crate::wire::PolicyVersion,
        /// What failed.
        detail: String,
    },
    /// A weight version is not in the store: never published, or expired after being
    /// superseded (fetch the latest instead).
    #[error("weights {version}: not in the store (never published, or expired after being superseded)")]
    WeightsGone {
        /// Which version.
        version: crate::wire::PolicyVersion,
    },
    /// No weight version has been published yet.
    #[error("no weights published for run {0}")]
    NoWeights(String),
    /// A caller passed a value an operation cannot take (a malformed stream entry id, a key
    /// that is not a dead-letter stream); the message names it.
    #[error("{0}")]
    InvalidArgument(String),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A local server (redis-server) could not be started or stopped.
    #[error("{0}")]
    Server(String),
    /// A local I/O error, with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ProtocolError {
    /// Whether Redis refused a write for want of memory (`OOM command not allowed when used
    /// memory > 'maxmemory'`): a state that passes when keys expire, unlike a bad command.
    /// A pipeline counts when any of its commands was refused so.
    pub fn is_out_of_memory(&self) -> bool {
        let Self::Redis { source, .. } = self else { return false };
        source.code() == Some("OOM")
            || source.clone().into_server_errors().is_some_and(|errs| errs.iter().any(|(_, e)| e.code() == "OOM"))
    }
}

/// The crate's result type.
pub type Result<T, E = ProtocolError> = std::result::Result<T, E>;
