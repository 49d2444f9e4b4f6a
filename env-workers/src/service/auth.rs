//! Authentication of env-worker connections: a shared token presented in a first frame before
//! any tarpc traffic, compared in constant time.
//!
//! ```text
//!  client                                   env-worker
//!    ── "RGENV/1\n" · u16 length · token ──►   (within env_worker.handshake_timeout_ms)
//!    ◄── 0x00 accepted | 0x01 refused ──────   refused: the connection is closed
//!    ── tarpc frames ─────────────────────►
//! ```
//!
//! A worker with no token accepts any (loopback only: [`super::EnvWorkerConfig::token_for`]).

use std::fmt;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The handshake's first bytes; anything else is not a Reagent client.
const MAGIC: &[u8; 8] = b"RGENV/1\n";
/// Longest token accepted.
pub const MAX_TOKEN_BYTES: usize = 1024;
const ACCEPTED: u8 = 0;
const REFUSED: u8 = 1;

/// A shared secret. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A token (tests; roles read theirs with [`Token::from_env`]). Longer than
    /// [`MAX_TOKEN_BYTES`] it is cut there.
    pub fn new(secret: impl Into<String>) -> Self {
        let mut s: String = secret.into();
        while s.len() > MAX_TOKEN_BYTES {
            s.pop();
        }
        Self(s)
    }

    /// The secret itself, to send as an HTTP bearer token (`crate::http_env`); never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether this is the base manifests' placeholder (`change-me…`), never a real secret.
    pub fn is_placeholder(&self) -> bool {
        self.0.starts_with("change-me")
    }

    /// The token in the environment variable `name`, if set and not blank.
    pub fn from_env(name: &str) -> Option<Self> {
        if name.trim().is_empty() {
            return None;
        }
        std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).map(Self::new)
    }

    /// Whether `presented` equals this token, in time independent of where they differ (the
    /// digests are compared, so the length does not leak either).
    pub fn matches(&self, presented: &[u8]) -> bool {
        let a = Sha256::digest(self.0.as_bytes());
        let b = Sha256::digest(presented);
        a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The peer spoke something else.
    #[error("not a Reagent env-worker client (bad handshake)")]
    NotReagent,
    /// The token was wrong or missing.
    #[error("wrong or missing token")]
    Refused,
    /// The handshake did not finish in time.
    #[error("handshake not finished within {0:?}")]
    Timeout(Duration),
    /// The socket failed.
    #[error("handshake i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Server side: reads the client's handshake within `within` and checks it against `token`
/// (`None`: any token). Answers the client either way.
pub async fn accept(stream: &mut TcpStream, token: Option<&Token>, within: Duration) -> Result<(), HandshakeError> {
    let read = async {
        let mut magic = [0u8; 8];
        stream.read_exact(&mut magic).await?;
        if &magic != MAGIC {
            return Err(HandshakeError::NotReagent);
        }
        let len = stream.read_u16().await? as usize;
        if len > MAX_TOKEN_BYTES {
            return Err(HandshakeError::NotReagent);
        }
        let mut presented = vec![0u8; len];
        stream.read_exact(&mut presented).await?;
        Ok(presented)
    };
    let presented = tokio::time::timeout(within, read).await.map_err(|_| HandshakeError::Timeout(within))??;
    let ok = token.is_none_or(|t| t.matches(&presented));
    let reply = [if ok { ACCEPTED } else { REFUSED }];
    let answer = stream.write_all(&reply);
    tokio::time::timeout(within, answer).await.map_err(|_| HandshakeError::Timeout(within))??;
    if ok {
        Ok(())
    } else {
        Err(HandshakeError::Refused)
    }
}

/// The bytes a client sends first: the magic and `token` (none: an empty one).
pub fn hello(token: Option<&Token>) -> Vec<u8> {
    let secret = token.map_or(&b""[..], |t| t.0.as_bytes());
    let mut hello = Vec::with_capacity(MAGIC.len() + 2 + secret.len());
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&(secret.len() as u16).to_be_bytes());
    hello.extend_from_slice(secret);
    hello
}

/// Client side: presents `token` (none: an empty one) and waits within `within` for the answer.
pub async fn present(stream: &mut TcpStream, token: Option<&Token>, within: Duration) -> Result<(), HandshakeError> {
    let hello = hello(token);
    let exchange = async {
        stream.write_all(&hello).await?;
        stream.read_u8().await
    };
    match tokio::time::timeout(within, exchange).await.map_err(|_| HandshakeError::Timeout(within))? {
        Ok(ACCEPTED) => Ok(()),
        Ok(_) => Err(HandshakeError::Refused),
        // The worker closes a refused connection; an early close reads as a refusal.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(HandshakeError::Refused),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_by_content_and_never_print() {
        let t = Token::new("s3cret");
        assert!(t.matches(b"s3cret"));
        assert!(!t.matches(b"s3cre"));
        assert!(!t.matches(b""));
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
