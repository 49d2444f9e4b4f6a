//! The reading of a judge's chat completion into the three Agent-RRM blocks; the request itself
//! is the shared chat client's (`env_workers::chat`).
//!
//! ```text
//!  Completion {content, reasoning_content?} ──► output::parse ──► Blocks    (else Malformed, with why)
//! ```

use env_workers::chat::{excerpt, read_completion, Completion};

use crate::error::JudgeError;
use crate::output::{self, Blocks};

/// The blocks of a completion from `endpoint`.
pub fn blocks(endpoint: &str, completion: Completion) -> Result<Blocks, JudgeError> {
    output::parse(&completion.content, completion.reasoning.as_deref()).map_err(|why| JudgeError::Malformed {
        endpoint: endpoint.to_string(),
        detail: format!("{why}; the answer began {:?}", excerpt(&completion.content)),
    })
}

/// Reads the blocks out of a response body. An answer cut at the length limit
/// (`finish_reason = "length"`) is malformed whatever it parses to: its blocks may be the
/// judge's unfinished echo of the trajectory.
pub fn read_answer(endpoint: &str, body: &[u8]) -> Result<Blocks, JudgeError> {
    blocks(endpoint, read_completion(endpoint, body)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_chat_completions() {
        let body = serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": output::render("t", "c", 0.5)}, "finish_reason": "stop"}]
        });
        let b = read_answer("e:1", body.to_string().as_bytes()).unwrap();
        assert_eq!((b.critique.as_str(), b.score), ("c", 0.5));
    }

    #[test]
    fn odd_bodies_are_malformed_and_say_why() {
        let err = read_answer("e:1", b"<html>busy</html>").unwrap_err().to_string();
        assert!(err.contains("e:1: malformed judge output: not a chat completion") && err.contains("busy"), "{err}");
        let err = read_answer("e:1", br#"{"choices": []}"#).unwrap_err().to_string();
        assert!(err.ends_with("no choices"), "{err}");
        let err = read_answer("e:1", br#"{"choices": [{"message": {"content": "fine"}}]}"#).unwrap_err().to_string();
        assert!(err.contains("the answer began \"fine\""), "{err}");
    }

    #[test]
    fn an_answer_cut_at_the_length_limit_is_malformed_even_when_it_parses() {
        let body = |finish: &str| {
            serde_json::json!({"choices": [{"message": {"content": output::render("t", "c", 0.9)}, "finish_reason": finish}]})
                .to_string()
        };
        assert_eq!(read_answer("e:1", body("stop").as_bytes()).unwrap().score, 0.9);
        let err = read_answer("e:1", body("length").as_bytes()).unwrap_err();
        assert_eq!(err.kind(), "malformed");
        assert!(err.to_string().contains("finish_reason \"length\""), "{err}");
    }
}
