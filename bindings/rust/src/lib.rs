//! Safe Rust bindings to libllm, an embeddable LLM inference library
//! (`include/llm/llm.h`; raw declarations in the `llm-sys` crate).
//!
//! ```no_run
//! let model = llm::Model::load("model.gguf")?;
//! let mut session = model.session(&llm::SessionParams::greedy())?;
//! let prompt = model.tokenize("Once upon a time", true, false)?;
//! for token in session.stream(&prompt, 16) {
//!     let piece = model.token_to_piece(token?, false)?;
//!     print!("{}", String::from_utf8_lossy(&piece));
//! }
//! # Ok::<(), llm::Error>(())
//! ```
//!
//! Threads:
//! - [`Model`] is `Send + Sync` (and cheap to clone): the library's model is
//!   immutable after load and may be used from any number of threads.
//! - [`Session`] is `Send`, not `Sync`: one thread drives it at a time. Two
//!   sessions driven from two threads at once are batched by the model.
//!   [`CancelHandle`] (`Send + Sync`) cancels a session from any thread.
//! - Callbacks: the `on_piece` closure of [`Session::generate`] and the
//!   progress closure of [`Model::load_with_progress`] run on the thread that
//!   made the call, inside it. The log sink of [`set_log_callback`] runs on
//!   any libllm thread. A panic in a closure stops the call and is resumed on
//!   the calling thread when the call returns (log sink: swallowed).
//!
//! ```compile_fail
//! // A Session is not Sync: share it between threads by moving it.
//! fn assert_sync<T: Sync>() {}
//! assert_sync::<llm::Session>();
//! ```
//!
//! Errors: every fallible call returns [`Result`]; an [`Error`] holds the
//! status and the message `llm_last_error()` gave right after the failing
//! call, read on the same thread before any other libllm call.
//!
//! Version: this crate was written for libllm 0.3. The first call that needs
//! the library ([`Model::load`] and friends) checks `llm_version()` and
//! refuses another major version, and for 0.x another minor version too,
//! with [`Status::Unsupported`] and a message naming both versions.
#![deny(unsafe_op_in_unsafe_fn)]

mod callback;
mod error;
mod log;
mod model;
mod session;
mod stream;
mod version;

pub use llm_sys as sys;

pub use error::{Error, Result, Status};
pub use log::{clear_log_callback, set_log_callback, LogLevel};
pub use model::{ChatMessage, Device, Model, ModelInfo, ModelParams};
pub use session::{
    CancelHandle, GenerateOptions, GenerateResult, SamplerParams, Session, SessionParams,
    StopReason,
};
pub use stream::{TokenStream, TryNext};
pub use version::{check_version, version, BINDING_MAJOR, BINDING_MINOR};

/// A token id of the model's vocabulary.
pub type Token = i32;

pub use sys::llm_batch_stats as BatchStats;
pub use sys::llm_kv_stats as KvStats;
pub use sys::llm_session_stats as SessionStats;
