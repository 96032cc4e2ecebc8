//! `Model`: a loaded GGUF model (`llm_model`).
use std::ffi::CString;
use std::mem::{size_of, MaybeUninit};
use std::os::raw::c_char;
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use crate::callback::{progress_trampoline, CallbackState};
use crate::error::{check, Error, Result, Status};
use crate::session::{Session, SessionParams};
use crate::version::check_version;
use crate::{BatchStats, KvStats, Token};
use llm_sys as sys;

/// Owns one `llm_model` reference. Sessions keep an `Arc` of it, so the
/// handle stays live (for `llm_token_is_eog` and friends) while they exist.
pub(crate) struct ModelHandle {
    pub(crate) raw: *mut sys::llm_model,
}

// Safety: llm.h: "an llm_model is immutable after load and may be used from
// any number of threads"; the handle is an id the library looks up per call.
unsafe impl Send for ModelHandle {}
unsafe impl Sync for ModelHandle {}

impl Drop for ModelHandle {
    fn drop(&mut self) {
        // Safety: the reference this handle owns; freed once.
        unsafe { sys::llm_model_free(self.raw) }
    }
}

/// Where a model runs (`llm_model_params.device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// The best device this build and host have (the default).
    #[default]
    Auto,
    Cpu,
    /// An NVIDIA GPU: `Unsupported` from a build without CUDA, `Device` from
    /// a host without a usable GPU; never a silent fallback to the CPU.
    Cuda,
}

/// Load options; zero/false fields take the library's defaults.
#[derive(Debug, Clone, Default)]
pub struct ModelParams {
    /// Load only the tokenizer and metadata (no sessions).
    pub vocab_only: bool,
    /// Threads of the model's batched passes; 0 = physical cores.
    pub n_threads: i32,
    /// Cap on the model's KV block pool; 0 = the library default.
    pub kv_budget_bytes: u64,
    /// Batch-invariant kernels (bit-identical alone or batched).
    pub deterministic: bool,
    /// Most tokens in one batched pass; 0 = 256.
    pub batch_tokens: i32,
    pub device: Device,
    pub device_index: i32,
}

impl ModelParams {
    fn to_sys(&self) -> Result<sys::llm_model_params> {
        let mut p = MaybeUninit::<sys::llm_model_params>::zeroed();
        // Safety: init_v writes at most the size we pass.
        check(unsafe {
            sys::llm_model_params_init_v(p.as_mut_ptr(), size_of::<sys::llm_model_params>())
        })?;
        // Safety: zeroed and then filled by the library: every field is valid.
        let mut p = unsafe { p.assume_init() };
        p.vocab_only = self.vocab_only as i32;
        p.n_threads = self.n_threads;
        p.kv_budget_bytes = self.kv_budget_bytes;
        p.deterministic = self.deterministic as i32;
        p.batch_tokens = self.batch_tokens;
        p.device = match self.device {
            Device::Auto => sys::LLM_DEVICE_AUTO,
            Device::Cpu => sys::LLM_DEVICE_CPU,
            Device::Cuda => sys::LLM_DEVICE_CUDA,
        };
        p.device_index = self.device_index;
        Ok(p)
    }
}

/// `llm_model_info` with Rust strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub vocab_only: bool,
    pub n_params: u64,
    pub n_ctx_train: i32,
    pub n_vocab: i32,
    pub n_layer: i32,
    pub n_embd: i32,
    pub n_head: i32,
    pub n_head_kv: i32,
    /// -1 where the model has none.
    pub bos_token: Token,
    pub eos_token: Token,
    pub eot_token: Token,
    pub pad_token: Token,
    pub add_bos: bool,
    pub architecture: String,
    pub name: String,
    pub device: Device,
    pub device_index: i32,
    /// Bytes of the model file that inference reads in place (resident).
    pub mapped_weight_bytes: u64,
    /// Host memory the backend holds as its own copies of weights.
    pub weight_copy_bytes: u64,
}

/// One chat turn for [`Model::chat_format`].
#[derive(Debug, Clone, Copy)]
pub struct ChatMessage<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

pub(crate) fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("{} contains a NUL byte", what),
        )
    })
}

/// Calls `fill(buffer, &mut needed)` with a buffer of `initial` elements and,
/// while it answers `LLM_ERR_BUFFER_TOO_SMALL`, again with `needed + spare`
/// elements (`spare` = 1 where the C function also writes a NUL); returns the
/// first `needed` elements.
pub(crate) fn call_growing<T: Copy + Default>(
    initial: usize,
    spare: usize,
    mut fill: impl FnMut(&mut [T], &mut usize) -> sys::llm_status,
) -> Result<Vec<T>> {
    let mut buf = vec![T::default(); initial];
    loop {
        let mut n = 0usize;
        let status = fill(&mut buf, &mut n);
        if status == sys::LLM_ERR_BUFFER_TOO_SMALL && n + spare > buf.len() {
            buf.resize(n + spare, T::default());
            continue;
        }
        check(status)?;
        buf.truncate(n);
        return Ok(buf);
    }
}

fn c_chars(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A loaded model. `Send + Sync` and cheap to clone (clones share the model).
/// [`Model::close`] (or dropping every clone and every session) frees it.
#[derive(Clone)]
pub struct Model {
    handle: Option<Arc<ModelHandle>>,
}

impl Model {
    /// Loads a GGUF file with default parameters.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        Model::load_with(path, &ModelParams::default())
    }

    pub fn load_with(path: impl AsRef<Path>, params: &ModelParams) -> Result<Model> {
        Model::load_impl(path.as_ref(), params, None)
    }

    /// Loads with a progress closure (progress in [0, 1]; return false to
    /// cancel the load, which then fails with `Status::Cancelled`). It runs
    /// on the calling thread, inside this call.
    pub fn load_with_progress<F: FnMut(f32) -> bool>(
        path: impl AsRef<Path>,
        params: &ModelParams,
        mut progress: F,
    ) -> Result<Model> {
        Model::load_impl(path.as_ref(), params, Some(&mut progress))
    }

    fn load_impl(
        path: &Path,
        params: &ModelParams,
        progress: Option<&mut dyn FnMut(f32) -> bool>,
    ) -> Result<Model> {
        check_version()?;
        let path_str = path.to_str().ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!("path {:?} is not UTF-8", path),
            )
        })?;
        let c_path = c_string("path", path_str)?;
        let mut p = params.to_sys()?;
        let mut state = progress.map(CallbackState::new);
        if let Some(state) = state.as_mut() {
            p.progress = Some(progress_trampoline);
            p.progress_user = state.user();
        }
        let mut raw = ptr::null_mut();
        // Safety: valid pointers; the progress state outlives the call.
        let status = unsafe { sys::llm_model_load(c_path.as_ptr(), &p, &mut raw) };
        let result = check(status);
        if let Some(state) = state.as_mut() {
            state.resume_panic();
        }
        result?;
        Ok(Model {
            handle: Some(Arc::new(ModelHandle { raw })),
        })
    }

    /// Frees this value's reference now. Later calls on it fail cleanly
    /// (`Status::InvalidArgument`, the library's "not a live model handle");
    /// clones and sessions keep working. Closing twice is a no-op.
    pub fn close(&mut self) {
        self.handle = None;
    }

    pub(crate) fn raw(&self) -> *mut sys::llm_model {
        self.handle.as_ref().map_or(ptr::null_mut(), |h| h.raw)
    }

    pub(crate) fn handle(&self) -> Option<Arc<ModelHandle>> {
        self.handle.clone()
    }

    pub(crate) fn from_handle(handle: Arc<ModelHandle>) -> Model {
        Model {
            handle: Some(handle),
        }
    }

    pub fn info(&self) -> Result<ModelInfo> {
        let mut info = MaybeUninit::<sys::llm_model_info>::zeroed();
        // Safety: the sizes passed are the sizes of the buffers.
        let info = unsafe {
            check(sys::llm_model_info_init_v(
                info.as_mut_ptr(),
                size_of::<sys::llm_model_info>(),
            ))?;
            check(sys::llm_model_get_info(self.raw(), info.as_mut_ptr()))?;
            info.assume_init()
        };
        Ok(ModelInfo {
            vocab_only: info.vocab_only != 0,
            n_params: info.n_params,
            n_ctx_train: info.n_ctx_train,
            n_vocab: info.n_vocab,
            n_layer: info.n_layer,
            n_embd: info.n_embd,
            n_head: info.n_head,
            n_head_kv: info.n_head_kv,
            bos_token: info.bos_token,
            eos_token: info.eos_token,
            eot_token: info.eot_token,
            pad_token: info.pad_token,
            add_bos: info.add_bos != 0,
            architecture: c_chars(&info.architecture),
            name: c_chars(&info.name),
            device: if info.device == sys::LLM_DEVICE_CUDA {
                Device::Cuda
            } else {
                Device::Cpu
            },
            device_index: info.device_index,
            mapped_weight_bytes: info.mapped_weight_bytes,
            weight_copy_bytes: info.weight_copy_bytes,
        })
    }

    /// Token ids of `text`. `add_special`: BOS/EOS as the model asks;
    /// `parse_special`: control-token text becomes control tokens.
    pub fn tokenize(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<Token>> {
        call_growing(text.len() + 4, 0, |tokens: &mut [Token], n| {
            // Safety: text is len bytes; tokens holds capacity entries.
            unsafe {
                sys::llm_tokenize(
                    self.raw(),
                    text.as_ptr() as *const c_char,
                    text.len(),
                    add_special as i32,
                    parse_special as i32,
                    tokens.as_mut_ptr(),
                    tokens.len(),
                    n,
                )
            }
        })
    }

    /// The bytes of one token (possibly part of a UTF-8 sequence).
    pub fn token_to_piece(&self, token: Token, render_special: bool) -> Result<Vec<u8>> {
        call_growing(32, 0, |buf: &mut [u8], n| {
            // Safety: buf holds capacity bytes.
            unsafe {
                sys::llm_token_to_piece(
                    self.raw(),
                    token,
                    render_special as i32,
                    buf.as_mut_ptr() as *mut c_char,
                    buf.len(),
                    n,
                )
            }
        })
    }

    /// The text of a token sequence (invalid UTF-8 replaced).
    pub fn detokenize(&self, tokens: &[Token], render_special: bool) -> Result<String> {
        let buf = call_growing(tokens.len() * 8 + 1, 1, |buf: &mut [u8], n| {
            // Safety: tokens and buf are valid for their lengths.
            unsafe {
                sys::llm_detokenize(
                    self.raw(),
                    tokens.as_ptr(),
                    tokens.len(),
                    render_special as i32,
                    buf.as_mut_ptr() as *mut c_char,
                    buf.len(),
                    n,
                )
            }
        })?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Whether `token` ends a generation (EOS, EOT, ...).
    pub fn is_eog(&self, token: Token) -> Result<bool> {
        let mut out = 0i32;
        // Safety: out is a valid i32.
        check(unsafe { sys::llm_token_is_eog(self.raw(), token, &mut out) })?;
        Ok(out != 0)
    }

    /// The model's chat template; `None` when it has none.
    pub fn chat_template(&self) -> Result<Option<String>> {
        let mut len = 0usize;
        // Safety: size query (NULL buffer, capacity 0).
        let status =
            unsafe { sys::llm_model_chat_template(self.raw(), ptr::null_mut(), 0, &mut len) };
        match status {
            sys::LLM_ERR_UNSUPPORTED => return Ok(None),
            sys::LLM_OK | sys::LLM_ERR_BUFFER_TOO_SMALL => {}
            other => return Err(Error::last(other)),
        }
        let mut buf = vec![0u8; len + 1];
        // Safety: buf holds len + 1 bytes.
        check(unsafe {
            sys::llm_model_chat_template(
                self.raw(),
                buf.as_mut_ptr() as *mut c_char,
                buf.len(),
                &mut len,
            )
        })?;
        buf.truncate(len);
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }

    /// Formats `messages` with the model's template (`template: None`) or a
    /// built-in one ("chatml", "llama3", ...).
    pub fn chat_format(
        &self,
        template: Option<&str>,
        messages: &[ChatMessage<'_>],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = template.map(|t| c_string("template name", t)).transpose()?;
        let owned: Vec<(CString, CString)> = messages
            .iter()
            .map(|m| Ok((c_string("role", m.role)?, c_string("content", m.content)?)))
            .collect::<Result<_>>()?;
        let c_messages: Vec<sys::llm_chat_message> = owned
            .iter()
            .map(|(r, c)| sys::llm_chat_message {
                role: r.as_ptr(),
                content: c.as_ptr(),
            })
            .collect();
        let template_ptr = template.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        let buf = call_growing(256, 1, |buf: &mut [u8], n| {
            // Safety: every pointer outlives the call; buf holds capacity bytes.
            unsafe {
                sys::llm_chat_format_v(
                    self.raw(),
                    template_ptr,
                    c_messages.as_ptr(),
                    c_messages.len(),
                    size_of::<sys::llm_chat_message>(),
                    add_generation_prompt as i32,
                    buf.as_mut_ptr() as *mut c_char,
                    buf.len(),
                    n,
                )
            }
        })?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    pub fn kv_stats(&self) -> Result<KvStats> {
        let mut s = KvStats::default();
        // Safety: s is a whole llm_kv_stats.
        unsafe {
            check(sys::llm_kv_stats_init_v(&mut s, size_of::<KvStats>()))?;
            check(sys::llm_model_kv_stats(self.raw(), &mut s))?;
        }
        Ok(s)
    }

    pub fn batch_stats(&self) -> Result<BatchStats> {
        let mut s = BatchStats::default();
        // Safety: s is a whole llm_batch_stats.
        unsafe {
            check(sys::llm_batch_stats_init_v(&mut s, size_of::<BatchStats>()))?;
            check(sys::llm_model_batch_stats(self.raw(), &mut s))?;
        }
        Ok(s)
    }

    /// A new session on this model (it keeps the model alive).
    pub fn session(&self, params: &SessionParams) -> Result<Session> {
        Session::new(self, params)
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Model({:p})", self.raw())
    }
}
