//! The cross-language agreement convention: load $LLM_MODEL_PATH, tokenize
//! argv[1] (add_special = 1, parse_special = 0), decode 16 tokens greedily
//! (temperature 0; end-of-generation tokens do not stop it) and print the
//! generated token ids space-separated on one line.
//!
//!   cargo run --example greedy -- "The capital of France is"
use std::process::exit;

fn run() -> llm::Result<Vec<llm::Token>> {
    let path = std::env::var("LLM_MODEL_PATH").unwrap_or_default();
    let prompt = std::env::args().nth(1).unwrap_or_default();
    let model = llm::Model::load(&path)?;
    let tokens = model.tokenize(&prompt, true, false)?;
    let mut session = model.session(&llm::SessionParams::greedy())?;
    session.prefill(&tokens)?;
    (0..16).map(|_| session.decode()).collect()
}

fn main() {
    if std::env::var_os("LLM_MODEL_PATH").is_none() || std::env::args().len() != 2 {
        eprintln!("usage: LLM_MODEL_PATH=model.gguf greedy PROMPT");
        exit(2);
    }
    match run() {
        Ok(ids) => {
            let ids: Vec<String> = ids.iter().map(|t| t.to_string()).collect();
            println!("{}", ids.join(" "));
        }
        Err(e) => {
            eprintln!("greedy: {}", e);
            exit(1);
        }
    }
}
