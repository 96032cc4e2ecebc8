//! `Session`: one conversation on a model (`llm_session`).
use std::cell::Cell;
use std::ffi::CString;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::os::raw::{c_char, c_void};
use std::ptr;
use std::sync::Arc;

use crate::callback::{piece_trampoline, CallbackState};
use crate::error::{check, Result};
use crate::model::{c_string, Model, ModelHandle};
use crate::stream::TokenStream;
use crate::{SessionStats, Token};
use llm_sys as sys;

/// Sampler settings (`llm_sampler_params`). `Default` is the library's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerParams {
    /// <= 0: greedy.
    pub temperature: f32,
    /// <= 0: off.
    pub top_k: i32,
    /// >= 1: off.
    pub top_p: f32,
    /// <= 0: off.
    pub min_p: f32,
    /// 1: off.
    pub repeat_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub penalty_last_n: i32,
}

impl SamplerParams {
    fn from_sys(p: &sys::llm_sampler_params) -> SamplerParams {
        SamplerParams {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            repeat_penalty: p.repeat_penalty,
            presence_penalty: p.presence_penalty,
            frequency_penalty: p.frequency_penalty,
            penalty_last_n: p.penalty_last_n,
        }
    }

    fn to_sys(self) -> sys::llm_sampler_params {
        sys::llm_sampler_params {
            // Frozen struct: its size must be exactly this.
            struct_size: size_of::<sys::llm_sampler_params>() as u32,
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            penalty_last_n: self.penalty_last_n,
        }
    }

    /// The library defaults with temperature 0 (always the most likely token).
    pub fn greedy() -> SamplerParams {
        SamplerParams {
            temperature: 0.0,
            ..SamplerParams::default()
        }
    }
}

impl Default for SamplerParams {
    fn default() -> Self {
        let mut p = sys::llm_sampler_params::default();
        // Safety: p is a whole llm_sampler_params; with its exact size the
        // call cannot fail.
        let status =
            unsafe { sys::llm_sampler_params_init_v(&mut p, size_of::<sys::llm_sampler_params>()) };
        assert_eq!(
            status,
            sys::LLM_OK,
            "llm_sampler_params_init_v refused its own size"
        );
        SamplerParams::from_sys(&p)
    }
}

/// Session options; zero fields take the library's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionParams {
    /// Context length; 0 = the model's trained context, capped at 4096.
    pub n_ctx: i32,
    /// F32 KV cache instead of F16.
    pub kv_f32: bool,
    /// Sampler RNG seed.
    pub seed: u64,
    pub sampler: SamplerParams,
}

impl SessionParams {
    /// Defaults with a greedy sampler.
    pub fn greedy() -> SessionParams {
        SessionParams {
            sampler: SamplerParams::greedy(),
            ..SessionParams::default()
        }
    }

    fn to_sys(&self) -> Result<sys::llm_session_params> {
        let mut p = MaybeUninit::<sys::llm_session_params>::zeroed();
        // Safety: init_v writes at most the size we pass.
        check(unsafe {
            sys::llm_session_params_init_v(p.as_mut_ptr(), size_of::<sys::llm_session_params>())
        })?;
        // Safety: zeroed, then filled by the library.
        let mut p = unsafe { p.assume_init() };
        p.n_ctx = self.n_ctx;
        p.kv_type = if self.kv_f32 {
            sys::LLM_KV_F32
        } else {
            sys::LLM_KV_F16
        };
        p.seed = self.seed;
        p.sampler = self.sampler.to_sys();
        Ok(p)
    }
}

/// Why a generation ended (`LLM_STOP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndOfGeneration,
    MaxTokens,
    StopString,
    Callback,
    ContextFull,
    Other(i32),
}

impl StopReason {
    pub(crate) fn from_code(code: i32) -> StopReason {
        match code {
            sys::LLM_STOP_EOG => StopReason::EndOfGeneration,
            sys::LLM_STOP_MAX_TOKENS => StopReason::MaxTokens,
            sys::LLM_STOP_STRING => StopReason::StopString,
            sys::LLM_STOP_CALLBACK => StopReason::Callback,
            sys::LLM_STOP_CONTEXT_FULL => StopReason::ContextFull,
            other => StopReason::Other(other),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GenerateOptions<'a> {
    /// Most tokens to generate; 0 = the library default (256).
    pub max_tokens: i32,
    /// Stop strings: the text before one is emitted, the string itself not.
    pub stop: &'a [&'a str],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenerateResult {
    pub stop_reason: StopReason,
    pub n_prompt_tokens: i32,
    /// Tokens sampled, an end-of-generation token included.
    pub n_generated: i32,
    pub prefill_ms: f64,
    pub decode_ms: f64,
}

/// Cancels a session's call in flight (or, with none, its next call that
/// runs the model), from any thread: that call fails with
/// `Status::Cancelled` and leaves the session as it was before it
/// (`llm_session_cancel`). Using it after the session was closed or dropped
/// is a clean `Status::InvalidArgument` error.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    raw: *mut sys::llm_session,
}

// Safety: llm_session_cancel may be called from any thread at any time; the
// handle is an id the library looks up (a freed one is refused, ids are never
// reused), never a pointer it dereferences.
unsafe impl Send for CancelHandle {}
unsafe impl Sync for CancelHandle {}

impl CancelHandle {
    pub fn cancel(&self) -> Result<()> {
        // Safety: see above.
        check(unsafe { sys::llm_session_cancel(self.raw) })
    }
}

/// One conversation. `Send` (move it to the thread that drives it), not
/// `Sync`: one call at a time. Dropping it (or [`Session::close`]) frees it;
/// the model stays alive while any session uses it.
pub struct Session {
    raw: *mut sys::llm_session,
    model: Arc<ModelHandle>,
    _not_sync: PhantomData<Cell<()>>,
}

// Safety: a session may be driven from any thread, one call at a time, which
// `&mut self` / !Sync guarantee.
unsafe impl Send for Session {}

impl Session {
    pub fn new(model: &Model, params: &SessionParams) -> Result<Session> {
        let p = params.to_sys()?;
        let mut raw = ptr::null_mut();
        // Safety: valid pointers; a closed model passes NULL, which is refused.
        check(unsafe { sys::llm_session_create(model.raw(), &p, &mut raw) })?;
        // A model handle exists whenever creation succeeded.
        let handle = model
            .handle()
            .expect("a session was created on a closed model");
        Ok(Session {
            raw,
            model: handle,
            _not_sync: PhantomData,
        })
    }

    /// The model this session runs on.
    pub fn model(&self) -> Model {
        Model::from_handle(self.model.clone())
    }

    pub(crate) fn raw(&self) -> *mut sys::llm_session {
        self.raw
    }

    /// Frees the session now. Later calls fail cleanly with
    /// `Status::InvalidArgument`; closing twice is a no-op.
    pub fn close(&mut self) {
        // Safety: our handle (NULL after the first close: a no-op).
        unsafe { sys::llm_session_free(self.raw) };
        self.raw = ptr::null_mut();
    }

    /// A handle that cancels this session from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle { raw: self.raw }
    }

    /// Appends `tokens` and runs them (blocking).
    pub fn prefill(&mut self, tokens: &[Token]) -> Result<()> {
        // Safety: tokens is valid for its length.
        check(unsafe { sys::llm_session_prefill(self.raw, tokens.as_ptr(), tokens.len()) })
    }

    /// Samples the next token, appends it and runs it (blocking).
    pub fn decode(&mut self) -> Result<Token> {
        let mut token = -1;
        // Safety: token is a valid out-parameter.
        check(unsafe { sys::llm_session_decode(self.raw, &mut token) })?;
        Ok(token)
    }

    /// The next-token logits (n_vocab floats), borrowed from the session.
    pub fn logits(&self) -> Result<&[f32]> {
        let mut data: *const f32 = ptr::null();
        let mut n = 0usize;
        // Safety: the library's array stays valid until the next call that
        // changes the session, which needs `&mut self`, so not while borrowed.
        unsafe {
            check(sys::llm_session_logits(self.raw, &mut data, &mut n))?;
            Ok(std::slice::from_raw_parts(data, n))
        }
    }

    /// Tokens in the session's history.
    pub fn n_tokens(&self) -> Result<usize> {
        let mut n = 0usize;
        // Safety: n is a valid out-parameter.
        check(unsafe { sys::llm_session_n_tokens(self.raw, &mut n) })?;
        Ok(n)
    }

    pub fn set_sampler(&mut self, params: &SamplerParams) -> Result<()> {
        let p = params.to_sys();
        // Safety: p is a whole llm_sampler_params.
        check(unsafe { sys::llm_session_set_sampler(self.raw, &p) })
    }

    pub fn reset(&mut self) -> Result<()> {
        // Safety: handle only.
        check(unsafe { sys::llm_session_reset(self.raw) })
    }

    pub fn set_seed(&mut self, seed: u64) -> Result<()> {
        // Safety: handle only.
        check(unsafe { sys::llm_session_set_seed(self.raw, seed) })
    }

    /// Keeps the first `n_tokens` tokens (recomputing the last one's logits).
    pub fn rewind(&mut self, n_tokens: usize) -> Result<()> {
        // Safety: handle only.
        check(unsafe { sys::llm_session_rewind(self.raw, n_tokens) })
    }

    /// A new session continuing exactly where this one stands, sharing its
    /// KV blocks copy-on-write.
    pub fn fork(&self) -> Result<Session> {
        let mut raw = ptr::null_mut();
        // Safety: valid out-parameter.
        check(unsafe { sys::llm_session_fork(self.raw, &mut raw) })?;
        Ok(Session {
            raw,
            model: self.model.clone(),
            _not_sync: PhantomData,
        })
    }

    /// The session's state as bytes (docs/SESSION_FORMAT.md).
    pub fn save(&self) -> Result<Vec<u8>> {
        let mut size = 0usize;
        // Safety: a size query (NULL, 0).
        let status = unsafe { sys::llm_session_save(self.raw, ptr::null_mut(), 0, &mut size) };
        if status != sys::LLM_ERR_BUFFER_TOO_SMALL {
            check(status)?;
        }
        let mut buf = vec![0u8; size];
        // Safety: buf holds size bytes.
        check(unsafe {
            sys::llm_session_save(
                self.raw,
                buf.as_mut_ptr() as *mut c_void,
                buf.len(),
                &mut size,
            )
        })?;
        buf.truncate(size);
        Ok(buf)
    }

    /// Replaces the session's state with bytes from [`Session::save`].
    pub fn load(&mut self, state: &[u8]) -> Result<()> {
        // Safety: state is valid for its length.
        check(unsafe {
            sys::llm_session_load(self.raw, state.as_ptr() as *const c_void, state.len())
        })
    }

    pub fn stats(&self) -> Result<SessionStats> {
        let mut s = SessionStats::default();
        // Safety: s is a whole llm_session_stats.
        unsafe {
            check(sys::llm_session_stats_init_v(
                &mut s,
                size_of::<SessionStats>(),
            ))?;
            check(sys::llm_session_get_stats(self.raw, &mut s))?;
        }
        Ok(s)
    }

    /// Prefills `prompt` (may be empty: continue from the current logits)
    /// and generates until an end-of-generation token, a stop string,
    /// `max_tokens`, the end of the context, or `on_piece` returning false.
    /// `on_piece` gets UTF-8-complete text and runs on this thread, inside
    /// this call. A failure (a cancel included) leaves the session as it was
    /// before the call.
    pub fn generate<F: FnMut(&str) -> bool>(
        &mut self,
        prompt: &[Token],
        options: &GenerateOptions<'_>,
        mut on_piece: F,
    ) -> Result<GenerateResult> {
        let stops: Vec<CString> = options
            .stop
            .iter()
            .map(|s| c_string("stop string", s))
            .collect::<Result<_>>()?;
        let stop_ptrs: Vec<*const c_char> = stops.iter().map(|s| s.as_ptr()).collect();
        let mut params = MaybeUninit::<sys::llm_generate_params>::zeroed();
        let mut result = sys::llm_generate_result::default();
        let mut state = CallbackState::new(&mut on_piece);
        // Safety: init_v writes at most the sizes passed; every pointer
        // handed to llm_generate outlives the call.
        let status = unsafe {
            check(sys::llm_generate_params_init_v(
                params.as_mut_ptr(),
                size_of::<sys::llm_generate_params>(),
            ))?;
            check(sys::llm_generate_result_init_v(
                &mut result,
                size_of::<sys::llm_generate_result>(),
            ))?;
            let mut params = params.assume_init();
            if options.max_tokens != 0 {
                params.max_tokens = options.max_tokens;
            }
            params.stop = if stop_ptrs.is_empty() {
                ptr::null()
            } else {
                stop_ptrs.as_ptr()
            };
            params.n_stop = stop_ptrs.len();
            params.on_piece = Some(piece_trampoline);
            params.user = state.user();
            sys::llm_generate(
                self.raw,
                prompt.as_ptr(),
                prompt.len(),
                &params,
                &mut result,
            )
        };
        let checked = check(status);
        state.resume_panic();
        checked?;
        Ok(GenerateResult {
            stop_reason: StopReason::from_code(result.stop_reason),
            n_prompt_tokens: result.n_prompt_tokens,
            n_generated: result.n_generated,
            prefill_ms: result.prefill_ms,
            decode_ms: result.decode_ms,
        })
    }

    /// Prefills `prompt` (may be empty) and yields up to `max_tokens`
    /// generated tokens, one per `next()` (blocking) or per completed
    /// [`TokenStream::try_next`] (never blocks: for game loops). It ends
    /// before an end-of-generation token (which stays in the history).
    pub fn stream(&mut self, prompt: &[Token], max_tokens: usize) -> TokenStream<'_> {
        TokenStream::new(self, prompt, max_tokens)
    }

    pub(crate) fn is_eog(&self, token: Token) -> Result<bool> {
        let mut out = 0i32;
        // Safety: out is a valid i32; the model handle is alive (we hold it).
        check(unsafe { sys::llm_token_is_eog(self.model.raw, token, &mut out) })?;
        Ok(out != 0)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({:p})", self.raw)
    }
}
