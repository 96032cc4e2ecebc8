//! The process-wide log sink (`llm_set_log_callback`).
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::RwLock;

use crate::error::{check, Result};
use llm_sys as sys;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

type Sink = Box<dyn Fn(LogLevel, &str) + Send + Sync>;

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

unsafe extern "C" fn log_trampoline(level: i32, message: *const c_char, _user: *mut c_void) {
    let level = match level {
        0 => LogLevel::Debug,
        1 => LogLevel::Info,
        2 => LogLevel::Warn,
        _ => LogLevel::Error,
    };
    // Safety: libllm passes a NUL-terminated message valid during the call.
    let message = unsafe { CStr::from_ptr(message) }.to_string_lossy();
    if let Ok(sink) = SINK.read() {
        if let Some(sink) = sink.as_ref() {
            // A panic cannot be handed to anyone here: drop it.
            let _ = catch_unwind(AssertUnwindSafe(|| sink(level, &message)));
        }
    }
}

/// Sends libllm's messages at `min_level` and above to `sink`. The sink runs
/// on any libllm thread (hence `Send + Sync`) and must not call
/// `set_log_callback`/`clear_log_callback` itself.
pub fn set_log_callback<F>(min_level: LogLevel, sink: F) -> Result<()>
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(sink));
    // Safety: the trampoline reads the sink through SINK, which outlives it.
    check(unsafe {
        sys::llm_set_log_callback(Some(log_trampoline), std::ptr::null_mut(), min_level as i32)
    })
}

/// Discards libllm's messages again (the default).
pub fn clear_log_callback() -> Result<()> {
    // Safety: NULL is the documented "discard" sink.
    let result =
        check(unsafe { sys::llm_set_log_callback(None, std::ptr::null_mut(), sys::LLM_LOG_ERROR) });
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = None;
    result
}
