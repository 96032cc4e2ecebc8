//! The check of `llm_version()` against the version this crate was written for.
use std::ffi::CStr;
use std::sync::Mutex;

use crate::error::{Error, Result, Status};
use llm_sys as sys;

/// The libllm version this crate was written for (the llm-sys header's).
pub const BINDING_MAJOR: u32 = sys::LLM_VERSION_MAJOR as u32;
pub const BINDING_MINOR: u32 = sys::LLM_VERSION_MINOR as u32;

/// The loaded library's version string, e.g. "0.3.0".
pub fn version() -> String {
    // Safety: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::llm_version()) }
        .to_string_lossy()
        .into_owned()
}

/// Whether a library `major.minor` serves a binding written for
/// `BINDING_MAJOR.BINDING_MINOR`: the same major, at least the minor the
/// binding uses, and for 0.x (where minors may break) exactly that minor.
pub(crate) fn compatible(major: u32, minor: u32) -> bool {
    major == BINDING_MAJOR
        && if BINDING_MAJOR == 0 {
            minor == BINDING_MINOR
        } else {
            minor >= BINDING_MINOR
        }
}

pub(crate) fn check_version_string(v: &str) -> Result<()> {
    let mut parts = v.split('.').map(|p| p.parse::<u32>());
    let ok = match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => compatible(major, minor),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            Status::Unsupported,
            format!(
                "libllm {} is not supported: this Rust binding was written for libllm {}.{}{}",
                v,
                BINDING_MAJOR,
                BINDING_MINOR,
                if BINDING_MAJOR == 0 {
                    " (0.x releases must match major and minor)"
                } else {
                    " (same major, same or newer minor)"
                }
            ),
        ))
    }
}

static CHECKED: Mutex<Option<Result<()>>> = Mutex::new(None);

/// Checks the loaded library's version once per process (the result is
/// remembered); every entry point that creates a libllm object calls it.
pub fn check_version() -> Result<()> {
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    checked
        .get_or_insert_with(|| check_version_string(&version()))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_written_for_minor_in_0x() {
        assert!(check_version_string(&format!("{}.{}.7", BINDING_MAJOR, BINDING_MINOR)).is_ok());
        let other_minor = format!("{}.{}.0", BINDING_MAJOR, BINDING_MINOR + 1);
        let other_major = format!("{}.{}.0", BINDING_MAJOR + 1, BINDING_MINOR);
        for v in [other_major.as_str(), "garbage", ""] {
            let e = check_version_string(v).unwrap_err();
            assert_eq!(e.status(), Status::Unsupported);
            assert!(e.message().contains("not supported"), "{}", e);
        }
        assert_eq!(
            check_version_string(&other_minor).is_ok(),
            BINDING_MAJOR != 0
        );
    }
}
