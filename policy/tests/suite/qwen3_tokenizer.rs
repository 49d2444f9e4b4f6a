//! Qwen3's real `tokenizer.json` (fetched by scripts/qwen_tokenizers.sh during set-up) behind
//! [`HfTokenizer`]: ids of special tokens, unicode, digits and code, and our ChatML framing, all
//! against Hugging Face `tokenizers` 0.23.3 and `transformers` 5.23.0 (scripts/hf_venv.sh).
//!
//! The golden values come from this snippet, run from the repository root in target/hf-venv:
//!
//! ```python
//! from tokenizers import Tokenizer
//! from transformers import AutoTokenizer
//! d = "target/qwen3-tokenizer"
//! tok = Tokenizer.from_file(f"{d}/tokenizer.json")
//! for c in CASES:                                   # the texts of `CASES` below
//!     print(tok.encode(c, add_special_tokens=False).ids)
//! print(tok.get_vocab_size(True))                   # 151669
//! hf = AutoTokenizer.from_pretrained(d)
//! full = [{"role": "system", "content": "You are a careful assistant."},
//!         {"role": "user", "content": "What is 2+2?"},
//!         {"role": "assistant", "content": "<think>\nTwo plus two.\n</think>\n\nThe answer is 4."}]
//! print(hf.apply_chat_template(full, tokenize=False))
//! print(hf.apply_chat_template(full, tokenize=True, return_dict=False))
//! prompt = [{"role": "system", "content": "You are a careful assistant."},
//!           {"role": "user", "content": "What is 2+2?"},
//!           {"role": "assistant", "content": "The answer is 4."},
//!           {"role": "user", "content": "And 3×3?"}]
//! print(hf.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True))
//! print(hf.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True, return_dict=False))
//! print(tok.decode(FULL_IDS[23:], skip_special_tokens=True))
//! ```
//!
//! Qwen3's template renders a final agent turn as `<think>\n{reasoning}\n</think>\n\n{answer}`
//! and an earlier one verbatim when it has no reasoning, so for these conversations its output
//! is exactly ours. It differs from ours where it drops the reasoning of earlier agent turns and
//! wraps tool results in a user turn (see policy/src/tokenizer/hf.rs).
//!
//! The file is required: set-up installs it, and a missing file fails the test (never skips it).

use std::path::PathBuf;
use std::sync::OnceLock;

use policy::{HfTokenizer, Tokenizer};
use protocol::wire::Role;

/// Where scripts/qwen_tokenizers.sh puts the files (REAGENT_QWEN3_TOKENIZER overrides both).
fn tokenizer_dir() -> PathBuf {
    match std::env::var_os("REAGENT_QWEN3_TOKENIZER") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/qwen3-tokenizer"),
    }
}

/// Qwen3's tokenizer, loaded once; panics with the set-up command when it is missing.
fn qwen3() -> &'static HfTokenizer {
    static TOKENIZER: OnceLock<HfTokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let path = tokenizer_dir().join("tokenizer.json");
        assert!(
            path.is_file(),
            "Qwen3's tokenizer is missing at {}: run `bash scripts/qwen_tokenizers.sh qwen3` (part of `scripts/setup.sh all`)",
            path.display()
        );
        HfTokenizer::from_file(&path).unwrap()
    })
}

/// Texts and their ids from `tokenizers` (the snippet above).
const CASES: &[(&str, &[u32])] = &[
    (
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        &[151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198],
    ),
    (
        "<think>\nLet me add them.\n</think>\n\nThe answer is 4.<|im_end|>",
        &[151667, 198, 10061, 752, 912, 1105, 624, 151668, 271, 785, 4226, 374, 220, 19, 13, 151645],
    ),
    (
        "naïve café — 你好，世界！🙂 Привет, мир",
        &[3376, 37572, 586, 51950, 1959, 220, 108386, 3837, 99489, 6313, 145080, 79484, 26991, 8178, 11, 137144],
    ),
    (
        "12345 + 678.90 = 13024.9; 3.14159e-10",
        &[
            16, 17, 18, 19, 20, 488, 220, 21, 22, 23, 13, 24, 15, 284, 220, 16, 18, 15, 17, 19, 13, 24, 26, 220, 18,
            13, 16, 19, 16, 20, 24, 68, 12, 16, 15,
        ],
    ),
    (
        "fn main() {\n    let x: Vec<u32> = (0..10).collect();\n    println!(\"{:?}\", x);\n}\n",
        &[
            8822, 1887, 368, 341, 262, 1077, 856, 25, 11312, 34837, 18, 17, 29, 284, 320, 15, 496, 16, 15, 568, 17384,
            543, 262, 13751, 88928, 25, 52652, 856, 317, 532,
        ],
    ),
    (
        "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"2*(3+4)\"}}\n</tool_call>",
        &[
            151657, 198, 4913, 606, 788, 330, 26586, 497, 330, 16370, 788, 5212, 9413, 788, 330, 17, 6599, 18, 10, 19,
            8, 95642, 151658,
        ],
    ),
];

/// `apply_chat_template(full, tokenize=False)`.
const FULL_TEXT: &str = "<|im_start|>system\nYou are a careful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nTwo plus two.\n</think>\n\nThe answer is 4.<|im_end|>\n";

/// `apply_chat_template(full, tokenize=True)`.
const FULL_IDS: &[u32] = &[
    151644, 8948, 198, 2610, 525, 264, 16585, 17847, 13, 151645, 198, 151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30,
    151645, 198, 151644, 77091, 198, 151667, 198, 11613, 5519, 1378, 624, 151668, 271, 785, 4226, 374, 220, 19, 13,
    151645, 198,
];

/// `apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)`.
const PROMPT_TEXT: &str = "<|im_start|>system\nYou are a careful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nThe answer is 4.<|im_end|>\n<|im_start|>user\nAnd 3×3?<|im_end|>\n<|im_start|>assistant\n";

/// `apply_chat_template(prompt, tokenize=True, add_generation_prompt=True)`.
const PROMPT_IDS: &[u32] = &[
    151644, 8948, 198, 2610, 525, 264, 16585, 17847, 13, 151645, 198, 151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30,
    151645, 198, 151644, 77091, 198, 785, 4226, 374, 220, 19, 13, 151645, 198, 151644, 872, 198, 3036, 220, 18, 17568,
    18, 30, 151645, 198, 151644, 77091, 198,
];

const SYSTEM: &str = "You are a careful assistant.";
const QUESTION: &str = "What is 2+2?";

#[test]
fn qwen3_ids_match_python_tokenizers() {
    let tok = qwen3();
    for (text, ids) in CASES {
        assert_eq!(tok.encode(text).unwrap(), *ids, "{text:?}");
        assert_eq!(tok.decode(ids, false), *text, "decoding {text:?}");
    }
}

#[test]
fn qwen3_special_tokens_and_vocabulary() {
    let tok = qwen3();
    let sp = tok.special_ids();
    assert_eq!((sp.bos, sp.eos, sp.end_of_turn), (None, 151643, 151645), "<|endoftext|>, <|im_end|>");
    assert_eq!(tok.vocab_size(), 151669, "151643 byte-level BPE tokens and 26 added ones");
    assert_eq!(tok.chat_template().stop_sequences(), vec![vec![151645]], "an agent turn stops on <|im_end|>");
    // <think> is an added token but not a special one: skipping special tokens keeps it.
    assert_eq!(tok.decode(&FULL_IDS[23..], true), "assistant\n<think>\nTwo plus two.\n</think>\n\nThe answer is 4.\n");
}

#[test]
fn qwen3_chat_rendering_matches_apply_chat_template() {
    let tok = qwen3();
    let template = tok.chat_template();
    let answer = "<think>\nTwo plus two.\n</think>\n\nThe answer is 4.";
    let turns = [(Role::System, SYSTEM), (Role::User, QUESTION), (Role::Agent, answer)];
    let chat = template.render(tok, &turns).unwrap();
    assert_eq!(chat.ids, FULL_IDS);
    assert_eq!(tok.decode(&chat.ids, false), FULL_TEXT);
    assert_eq!(chat.turn_starts, vec![0, 11, 23]);
    // The loss mask is exactly the agent's text and its <|im_end|>: not its header, not the
    // newline after it.
    let trained: Vec<usize> = (0..chat.ids.len()).filter(|&i| chat.loss_mask[i]).collect();
    assert_eq!(trained, (26..=40).collect::<Vec<_>>());
    assert_eq!(chat.ids[40], 151645);

    let turns =
        [(Role::System, SYSTEM), (Role::User, QUESTION), (Role::Agent, "The answer is 4."), (Role::User, "And 3×3?")];
    let prompt = template.generation_prompt(tok, &turns).unwrap();
    assert_eq!(prompt, PROMPT_IDS);
    assert_eq!(tok.decode(&prompt, false), PROMPT_TEXT);
}
