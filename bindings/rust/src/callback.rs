//! Closures behind libllm's C callbacks (`void *user` + a trampoline).
//!
//! The state lives on the stack of the Rust call that passes it to libllm and
//! outlives that call; the C callbacks run inside the call on the same
//! thread. A panic must not unwind into C: the trampoline catches it, asks
//! libllm to stop, and the caller resumes it once the C call returned.
use std::any::Any;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

pub(crate) struct CallbackState<'a, A> {
    f: &'a mut dyn FnMut(A) -> bool,
    panic: Option<Box<dyn Any + Send>>,
}

impl<'a, A> CallbackState<'a, A> {
    pub(crate) fn new(f: &'a mut dyn FnMut(A) -> bool) -> Self {
        CallbackState { f, panic: None }
    }

    pub(crate) fn user(&mut self) -> *mut c_void {
        self as *mut Self as *mut c_void
    }

    /// Runs the closure; 0 = go on, 1 = stop (the closure said so or panicked).
    fn call(&mut self, arg: A) -> i32 {
        if self.panic.is_some() {
            return 1;
        }
        let f = &mut self.f;
        match catch_unwind(AssertUnwindSafe(|| f(arg))) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(payload) => {
                self.panic = Some(payload);
                1
            }
        }
    }

    /// Re-raises a panic of the closure on the calling thread.
    pub(crate) fn resume_panic(&mut self) {
        if let Some(payload) = self.panic.take() {
            resume_unwind(payload);
        }
    }
}

/// `llm_progress_fn`: `user` is a `CallbackState<f32>`.
pub(crate) unsafe extern "C" fn progress_trampoline(progress: f32, user: *mut c_void) -> i32 {
    // Safety: user is the CallbackState the caller passed with this function.
    let state = unsafe { &mut *(user as *mut CallbackState<f32>) };
    state.call(progress)
}

/// `llm_piece_fn`: `user` is a `CallbackState<&str>`. libllm passes
/// UTF-8-complete text; anything else is replaced, never trusted.
pub(crate) unsafe extern "C" fn piece_trampoline(
    text: *const c_char,
    len: usize,
    user: *mut c_void,
) -> i32 {
    // Safety: user is the CallbackState the caller passed with this function;
    // text points to len bytes for the duration of the callback.
    let state = unsafe { &mut *(user as *mut CallbackState<&str>) };
    let bytes: &[u8] = if len == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(text as *const u8, len) }
    };
    let text = String::from_utf8_lossy(bytes);
    state.call(&text)
}
