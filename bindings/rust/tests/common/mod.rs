//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The default model, or None (the caller skips) when LLM_MODEL_PATH is unset.
pub fn model_path(test: &str) -> Option<String> {
    match std::env::var("LLM_MODEL_PATH") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            eprintln!(
                "SKIP {}: LLM_MODEL_PATH is not set (export it to a GGUF model, e.g. the \
                 default SmolLM2-135M-Instruct.Q4_1.gguf from scripts/fetch_model.sh)",
                test
            );
            None
        }
    }
}

pub fn load(path: &str, deterministic: bool) -> llm::Model {
    let params = llm::ModelParams {
        n_threads: 2,
        deterministic,
        ..Default::default()
    };
    llm::Model::load_with(path, &params).expect("loading the model")
}

/// The first prompt of tests/data/golden/smollm2.teacher.json (written by
/// tools/gen_teacher_goldens.py with llama-cpp-python): its text, its token
/// ids and llama.cpp's greedy continuation.
pub struct Golden {
    pub text: String,
    pub ids: Vec<i32>,
    pub continuation: Vec<i32>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The JSON string starting at the opening quote of `s`.
fn json_string(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s[1..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return out,
            '\\' => match chars.next().unwrap() {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    panic!("unterminated JSON string");
}

fn json_ints(s: &str) -> Vec<i32> {
    let end = s.find(']').unwrap();
    s[1..end]
        .split(',')
        .map(|v| v.trim().parse().unwrap())
        .collect()
}

fn after<'a>(s: &'a str, key: &str) -> &'a str {
    let at = s
        .find(key)
        .unwrap_or_else(|| panic!("{} not in the golden", key))
        + key.len();
    s[at..].trim_start()
}

pub fn golden() -> Golden {
    let path = repo().join("tests/data/golden/smollm2.teacher.json");
    let json = std::fs::read_to_string(&path).expect("reading the golden");
    let prompt = after(&json, "\"prompts\":");
    Golden {
        text: json_string(after(prompt, "\"text\":")),
        ids: json_ints(after(prompt, "\"ids\":")),
        continuation: json_ints(after(prompt, "\"continuation\":")),
    }
}
