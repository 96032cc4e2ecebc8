//! The safe crate against the real library and the default model
//! ($LLM_MODEL_PATH; every test skips with a message when it is unset).
mod common;

use std::sync::mpsc;
use std::thread;

use common::{golden, load, model_path};
use llm::{GenerateOptions, Model, SessionParams, Status, StopReason, TryNext};

#[test]
fn model_is_send_sync_session_is_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Model>();
    send_sync::<llm::CancelHandle>();
    send::<llm::Session>();
    // Session is not Sync: the compile_fail doctest in src/lib.rs checks it.
}

#[test]
fn library_version_is_the_one_the_binding_was_written_for() {
    llm::check_version().expect("version check");
    let v = llm::version();
    assert!(
        v.starts_with(&format!("{}.{}.", llm::BINDING_MAJOR, llm::BINDING_MINOR)),
        "{}",
        v
    );
}

#[test]
fn tokenizes_like_llama_cpp() {
    let path = match model_path("tokenizes_like_llama_cpp") {
        Some(p) => p,
        None => return,
    };
    let model = load(&path, false);
    let g = golden();
    let info = model.info().unwrap();
    assert_eq!(info.architecture, "llama");
    assert_eq!(info.n_vocab, 49152);
    // The struct's last fields arrive (the load memory report).
    assert!(info.mapped_weight_bytes > 0 && info.weight_copy_bytes > 0);
    let ids = model.tokenize(&g.text, true, false).unwrap();
    assert_eq!(ids, g.ids);
    assert_eq!(model.detokenize(&ids, false).unwrap(), g.text);
}

fn greedy_tokens(model: &Model, prompt: &[i32], n: usize) -> Vec<i32> {
    let mut session = model.session(&SessionParams::greedy()).unwrap();
    session.prefill(prompt).unwrap();
    (0..n).map(|_| session.decode().unwrap()).collect()
}

#[test]
fn greedy_generation_agrees_across_paths_and_with_llama_cpp() {
    let path = match model_path("greedy_generation") {
        Some(p) => p,
        None => return,
    };
    let model = load(&path, false);
    let g = golden();
    let n = 12;
    let by_decode = greedy_tokens(&model, &g.ids, n);
    // llama.cpp's greedy continuation of the same prompt (the golden): the
    // first tokens have clear argmax margins, so any kernel bug shows here.
    assert_eq!(
        by_decode[..4],
        g.continuation[..4],
        "first greedy tokens vs llama.cpp"
    );

    let mut session = model.session(&SessionParams::greedy()).unwrap();
    let by_iter: Vec<i32> = session
        .stream(&g.ids, n)
        .collect::<llm::Result<Vec<i32>>>()
        .unwrap();
    assert_eq!(by_iter, by_decode, "iterator");
    assert_eq!(session.n_tokens().unwrap(), g.ids.len() + n);

    let mut session = model.session(&SessionParams::greedy()).unwrap();
    let mut polled = Vec::new();
    let mut pending = 0usize;
    {
        let mut stream = session.stream(&g.ids, n);
        loop {
            match stream.try_next().unwrap() {
                TryNext::Token(t) => polled.push(t),
                TryNext::Pending => {
                    pending += 1;
                    thread::yield_now();
                }
                TryNext::Finished => break,
            }
        }
        assert_eq!(stream.try_next().unwrap(), TryNext::Finished);
    }
    assert_eq!(polled, by_decode, "try_next");
    assert!(pending > 0, "try_next never reported a running step");

    let mut session = model.session(&SessionParams::greedy()).unwrap();
    let mut text = String::new();
    let opts = GenerateOptions {
        max_tokens: n as i32,
        stop: &[],
    };
    let result = session
        .generate(&g.ids, &opts, |piece| {
            text.push_str(piece);
            true
        })
        .unwrap();
    assert_eq!(result.n_prompt_tokens as usize, g.ids.len());
    if result.stop_reason == StopReason::MaxTokens {
        assert_eq!(result.n_generated as usize, n);
        assert_eq!(text, model.detokenize(&by_decode, false).unwrap());
    }
}

#[test]
fn two_sessions_on_two_threads_and_a_cancel_from_a_third() {
    let path = match model_path("two_sessions_cancel") {
        Some(p) => p,
        None => return,
    };
    // Batch-invariant kernels: B's tokens must equal a solo run's exactly.
    let model = load(&path, true);
    let g = golden();
    let n = 24;
    let solo = greedy_tokens(&model, &g.ids, n);

    let mut a = model.session(&SessionParams::greedy()).unwrap();
    let b = model.session(&SessionParams::greedy()).unwrap();
    let cancel_a = a.cancel_handle();
    let (first_piece_tx, first_piece_rx) = mpsc::channel::<()>();
    let (cancelled_tx, cancelled_rx) = mpsc::channel::<()>();

    let canceller = thread::spawn(move || {
        first_piece_rx.recv().unwrap();
        cancel_a.cancel().unwrap();
        cancelled_tx.send(()).unwrap();
    });
    let ids = g.ids.clone();
    let thread_a = thread::spawn(move || {
        let mut first = true;
        let opts = GenerateOptions {
            max_tokens: 200,
            stop: &[],
        };
        let result = a.generate(&ids, &opts, |_| {
            if first {
                first = false;
                // Hold the call until the cancel is issued, so it lands in it.
                first_piece_tx.send(()).unwrap();
                cancelled_rx.recv().unwrap();
            }
            true
        });
        (a, result)
    });
    let ids = g.ids.clone();
    let thread_b = thread::spawn(move || {
        let mut b = b;
        let tokens: Vec<i32> = b.stream(&ids, n).collect::<llm::Result<_>>().unwrap();
        tokens
    });

    let (mut a, result_a) = thread_a.join().unwrap();
    let tokens_b = thread_b.join().unwrap();
    canceller.join().unwrap();

    let err = result_a.expect_err("the cancelled generation succeeded");
    assert_eq!(err.status(), Status::Cancelled, "{}", err);
    assert!(!err.message().is_empty());
    assert_eq!(
        a.n_tokens().unwrap(),
        0,
        "a failed generate leaves the session as before"
    );
    // The stream ends before an end-of-generation token; solo decoded through.
    let eog = solo
        .iter()
        .position(|t| model.is_eog(*t).unwrap())
        .unwrap_or(n);
    assert!(
        eog >= 8,
        "the prompt should give a long greedy continuation"
    );
    assert_eq!(tokens_b, solo[..eog], "session B batched beside A");
    // A is usable again and continues like a fresh session.
    a.prefill(&g.ids).unwrap();
    assert_eq!(a.decode().unwrap(), solo[0]);
}

#[test]
fn use_after_close_is_a_clean_error() {
    let path = match model_path("use_after_close") {
        Some(p) => p,
        None => return,
    };
    let mut model = load(&path, false);
    let mut session = model.session(&SessionParams::greedy()).unwrap();
    let mut other = model.session(&SessionParams::greedy()).unwrap();
    let cancel = session.cancel_handle();
    let ids = model.tokenize("Hello", true, false).unwrap();
    session.prefill(&ids).unwrap();

    session.close();
    session.close(); // twice: a no-op
    for err in [
        session.decode().unwrap_err(),
        session.prefill(&ids).unwrap_err(),
        session.n_tokens().unwrap_err(),
        session.logits().unwrap_err(),
        session.fork().unwrap_err(),
        session.save().unwrap_err(),
        cancel.cancel().unwrap_err(),
    ] {
        assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
        assert!(err.message().contains("session"), "{}", err);
    }
    let mut stream = session.stream(&ids, 4);
    assert!(stream.next().unwrap().is_err());
    assert!(stream.next().is_none());
    drop(stream);

    // Closing the model: this value fails cleanly, sessions keep working.
    model.close();
    let err = model.tokenize("Hello", true, false).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
    assert!(err.message().contains("model"), "{}", err);
    assert_eq!(
        model
            .session(&SessionParams::default())
            .unwrap_err()
            .status(),
        Status::InvalidArgument
    );
    other.prefill(&ids).unwrap();
    other.decode().unwrap();
    assert!(other.model().is_eog(0).is_ok());
    drop(other);
    // A cancel handle of a dropped session: refused, never a crash.
    let dropped = load(&path, false)
        .session(&SessionParams::default())
        .unwrap();
    let handle = dropped.cancel_handle();
    drop(dropped);
    assert_eq!(
        handle.cancel().unwrap_err().status(),
        Status::InvalidArgument
    );
}

#[test]
fn bad_input_gives_status_and_message() {
    let err = Model::load("/nonexistent/model.gguf").unwrap_err();
    assert_eq!(err.status(), Status::Io, "{}", err);
    assert!(err.message().contains("/nonexistent/model.gguf"), "{}", err);
    assert!(err.to_string().starts_with("LLM_ERR_IO: "), "{}", err);
    let err = Model::load("bad\0path").unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);

    let path = match model_path("bad_input") {
        Some(p) => p,
        None => return,
    };
    let model = load(&path, false);
    let params = SessionParams {
        n_ctx: 8,
        ..SessionParams::greedy()
    };
    let mut session = model.session(&params).unwrap();

    let err = session.decode().unwrap_err(); // no logits yet
    assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
    let first_message = err.message().to_string();
    assert!(!first_message.is_empty());

    let err = session.prefill(&[1; 20]).unwrap_err();
    assert_eq!(err.status(), Status::ContextFull, "{}", err);
    assert_ne!(
        err.message(),
        first_message,
        "each error carries its own call's message"
    );

    let err = session.prefill(&[1_000_000]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
    let err = model.token_to_piece(-5, false).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
    let err = session.rewind(5).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
    let err = session.load(b"not a saved session").unwrap_err();
    assert!(
        matches!(err.status(), Status::InvalidArgument | Status::Unsupported),
        "{}",
        err
    );
    let err = session
        .generate(
            &[1],
            &GenerateOptions {
                max_tokens: -1,
                stop: &[],
            },
            |_| true,
        )
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
    let err = model
        .chat_format(
            Some("no-such-template"),
            &[llm::ChatMessage {
                role: "user",
                content: "hi",
            }],
            true,
        )
        .unwrap_err();
    assert_eq!(err.status(), Status::Unsupported, "{}", err);
    // Nothing of the failed calls stuck: the session still works.
    assert_eq!(session.n_tokens().unwrap(), 0);
    session.prefill(&[1, 2]).unwrap();
    session.decode().unwrap();
}

#[test]
fn a_panic_in_on_piece_reaches_the_caller_and_the_session_survives() {
    let path = match model_path("panic_in_callback") {
        Some(p) => p,
        None => return,
    };
    let model = load(&path, false);
    let ids = model.tokenize("Hello", true, false).unwrap();
    let mut session = model.session(&SessionParams::greedy()).unwrap();
    let opts = GenerateOptions {
        max_tokens: 8,
        stop: &[],
    };
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = session.generate(&ids, &opts, |_| panic!("boom"));
    }));
    assert_eq!(*caught.unwrap_err().downcast::<&str>().unwrap(), "boom");
    session.generate(&[], &opts, |_| true).unwrap();
}

#[test]
fn fork_save_load_and_stats() {
    let path = match model_path("fork_save_load") {
        Some(p) => p,
        None => return,
    };
    let model = load(&path, false);
    let ids = model.tokenize("The lantern", true, false).unwrap();
    let mut session = model.session(&SessionParams::greedy()).unwrap();
    session.prefill(&ids).unwrap();
    let saved = session.save().unwrap();
    let mut child = session.fork().unwrap();
    let t = session.decode().unwrap();
    assert_eq!(child.decode().unwrap(), t);
    let mut restored = model.session(&SessionParams::greedy()).unwrap();
    restored.load(&saved).unwrap();
    assert_eq!(restored.decode().unwrap(), t);
    assert_eq!(restored.logits().unwrap().len(), 49152);
    assert!(model.kv_stats().unwrap().blocks_used > 0);
    // One pool: SmolLM2 has no sliding window (a Gemma model has two).
    assert_eq!(model.kv_stats().unwrap().n_pools, 1);
    assert_eq!(model.kv_stats().unwrap().local_blocks_used, 0);
    assert!(model.batch_stats().unwrap().steps_completed > 0);
    assert!(session.stats().unwrap().iterations > 0);
    assert!(model.chat_template().unwrap().is_some());
}

#[test]
fn progress_and_log_callbacks() {
    let path = match model_path("callbacks") {
        Some(p) => p,
        None => return,
    };
    let messages = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = messages.clone();
    llm::set_log_callback(llm::LogLevel::Info, move |_, m| {
        sink.lock().unwrap().push(m.to_string())
    })
    .unwrap();
    let params = llm::ModelParams {
        n_threads: 1,
        ..Default::default()
    };
    let mut seen = Vec::new();
    let model = Model::load_with_progress(&path, &params, |p| {
        seen.push(p);
        true
    });
    llm::clear_log_callback().unwrap();
    model.unwrap();
    assert!(
        !seen.is_empty() && *seen.last().unwrap() == 1.0,
        "{:?}",
        seen
    );
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{:?}", seen);
    assert!(
        !messages.lock().unwrap().is_empty(),
        "no log message at INFO during a load"
    );

    // Returning false cancels the load.
    let err = Model::load_with_progress(&path, &params, |_| false).unwrap_err();
    assert_eq!(err.status(), Status::Cancelled, "{}", err);
}

#[test]
fn dropping_a_stream_mid_step_and_cancelling_a_polled_step() {
    let path = match model_path("stream_drop") {
        Some(p) => p,
        None => return,
    };
    let model = load(&path, false);
    let ids = model
        .tokenize("The lantern lit the way", true, false)
        .unwrap();
    let mut session = model.session(&SessionParams::greedy()).unwrap();
    session.prefill(&ids).unwrap();
    let before = session.n_tokens().unwrap();
    {
        // Submit a decode step and drop the stream while it may still run.
        let mut stream = session.stream(&[], 4);
        let _ = stream.try_next().unwrap();
    }
    // The dropped stream collected its step: the session is free again. The
    // step was cancelled, or had already been collected as a token.
    let after = session.n_tokens().unwrap();
    assert!(
        after == before || after == before + 1,
        "{} -> {}",
        before,
        after
    );
    session.rewind(before).unwrap();

    // A cancel from another thread while a polled step runs: try_next reports
    // it and the session is as before that step.
    let cancel = session.cancel_handle();
    let mut stream = session.stream(&[], 4);
    assert!(matches!(
        stream.try_next().unwrap(),
        TryNext::Pending | TryNext::Token(_)
    ));
    thread::spawn(move || cancel.cancel().unwrap())
        .join()
        .unwrap();
    let mut outcome = None;
    for _ in 0..1_000_000 {
        match stream.try_next() {
            Ok(TryNext::Pending) => thread::yield_now(),
            Ok(TryNext::Token(_)) => continue,
            Ok(TryNext::Finished) => break,
            Err(e) => {
                outcome = Some(e);
                break;
            }
        }
    }
    let err = outcome.expect("the cancel was not reported");
    assert_eq!(err.status(), Status::Cancelled, "{}", err);
    assert_eq!(stream.try_next().unwrap(), TryNext::Finished);
    drop(stream);
    let n = session.n_tokens().unwrap();
    assert!(n >= before && n <= before + 1, "{}", n);
    session.decode().unwrap();
}
