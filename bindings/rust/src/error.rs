//! `llm::Error`: a libllm status plus the message the library gave for it.
use std::ffi::CStr;
use std::fmt;

use llm_sys as sys;

/// A libllm status code other than `LLM_OK` (llm.h, "status codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidArgument,
    Io,
    BadModel,
    Unsupported,
    OutOfMemory,
    ContextFull,
    KvFull,
    Cancelled,
    BufferTooSmall,
    Busy,
    Device,
    Internal,
    /// A code added by a newer library (minor releases may add codes).
    Other(i32),
}

impl Status {
    pub fn from_code(code: i32) -> Status {
        match code {
            sys::LLM_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::LLM_ERR_IO => Status::Io,
            sys::LLM_ERR_BAD_MODEL => Status::BadModel,
            sys::LLM_ERR_UNSUPPORTED => Status::Unsupported,
            sys::LLM_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::LLM_ERR_CONTEXT_FULL => Status::ContextFull,
            sys::LLM_ERR_KV_FULL => Status::KvFull,
            sys::LLM_ERR_CANCELLED => Status::Cancelled,
            sys::LLM_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::LLM_ERR_BUSY => Status::Busy,
            sys::LLM_ERR_DEVICE => Status::Device,
            sys::LLM_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        }
    }

    /// The C value (`LLM_ERR_*`).
    pub fn code(self) -> i32 {
        match self {
            Status::InvalidArgument => sys::LLM_ERR_INVALID_ARGUMENT,
            Status::Io => sys::LLM_ERR_IO,
            Status::BadModel => sys::LLM_ERR_BAD_MODEL,
            Status::Unsupported => sys::LLM_ERR_UNSUPPORTED,
            Status::OutOfMemory => sys::LLM_ERR_OUT_OF_MEMORY,
            Status::ContextFull => sys::LLM_ERR_CONTEXT_FULL,
            Status::KvFull => sys::LLM_ERR_KV_FULL,
            Status::Cancelled => sys::LLM_ERR_CANCELLED,
            Status::BufferTooSmall => sys::LLM_ERR_BUFFER_TOO_SMALL,
            Status::Busy => sys::LLM_ERR_BUSY,
            Status::Device => sys::LLM_ERR_DEVICE,
            Status::Internal => sys::LLM_ERR_INTERNAL,
            Status::Other(code) => code,
        }
    }

    /// The library's static name, e.g. "LLM_ERR_IO".
    pub fn name(self) -> String {
        // Safety: llm_status_string never returns NULL and its strings are static.
        unsafe { CStr::from_ptr(sys::llm_status_string(self.code())) }
            .to_string_lossy()
            .into_owned()
    }
}

/// A failed libllm call: its status and the message `llm_last_error()` gave
/// right after it, on the same thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// The error of the call that just returned `code` on this thread.
    /// Must be called before any other libllm call on this thread: the
    /// message is thread-local and overwritten by the next call.
    pub(crate) fn last(code: i32) -> Error {
        // Safety: llm_last_error never returns NULL; the text is copied before
        // any other libllm call can replace it.
        let message = unsafe { CStr::from_ptr(sys::llm_last_error()) }
            .to_string_lossy()
            .into_owned();
        Error {
            status: Status::from_code(code),
            message,
        }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Ok for `LLM_OK`, else the error with this thread's last message.
pub(crate) fn check(code: i32) -> Result<()> {
    if code == sys::LLM_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}
