//! Raw declarations of libllm's C ABI, `include/llm/llm.h` (version 0.3),
//! written by hand (no bindgen). `tests/header.rs` checks them against the
//! header: every exported function with its parameter and return types,
//! every `#define`d constant, and every struct's fields, size and field
//! offsets (as a C compiler lays them out).
//!
//! Everything here is `unsafe` and follows the header's rules; the `llm`
//! crate is the safe interface. The header's `llm_x_init(p)` names are C
//! macros that pass `sizeof` of the header's struct: from Rust call
//! `llm_x_init_v(p, size_of::<llm_x>())`. The unsized `llm_x_init`
//! functions declared here exist for old binaries and write the size their
//! struct had when they were published (docs/ABI.md).
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

/// The header this crate was written against.
pub const LLM_VERSION_MAJOR: i32 = 0;
pub const LLM_VERSION_MINOR: i32 = 3;
pub const LLM_VERSION_PATCH: i32 = 0;

// ---- status codes ----------------------------------------------------------
pub type llm_status = i32;
pub const LLM_OK: llm_status = 0;
pub const LLM_ERR_INVALID_ARGUMENT: llm_status = 1;
pub const LLM_ERR_IO: llm_status = 2;
pub const LLM_ERR_BAD_MODEL: llm_status = 3;
pub const LLM_ERR_UNSUPPORTED: llm_status = 4;
pub const LLM_ERR_OUT_OF_MEMORY: llm_status = 5;
pub const LLM_ERR_CONTEXT_FULL: llm_status = 6;
pub const LLM_ERR_KV_FULL: llm_status = 7;
pub const LLM_ERR_CANCELLED: llm_status = 8;
pub const LLM_ERR_BUFFER_TOO_SMALL: llm_status = 9;
pub const LLM_ERR_BUSY: llm_status = 10;
pub const LLM_ERR_DEVICE: llm_status = 11;
pub const LLM_ERR_INTERNAL: llm_status = 12;

// ---- logging ---------------------------------------------------------------
pub const LLM_LOG_DEBUG: i32 = 0;
pub const LLM_LOG_INFO: i32 = 1;
pub const LLM_LOG_WARN: i32 = 2;
pub const LLM_LOG_ERROR: i32 = 3;

/// May be called from any libllm thread: it must be thread-safe.
pub type llm_log_fn =
    Option<unsafe extern "C" fn(level: i32, message: *const c_char, user: *mut c_void)>;

// ---- types -----------------------------------------------------------------
pub type llm_token = i32;

/// Opaque model handle (an id in the library's registry, never dereferenced).
#[repr(C)]
pub struct llm_model {
    _private: [u8; 0],
}

/// Opaque session handle (an id in the library's registry, never dereferenced).
#[repr(C)]
pub struct llm_session {
    _private: [u8; 0],
}

// ---- model -----------------------------------------------------------------
/// Runs on the loading thread. Return non-zero to cancel the load.
pub type llm_progress_fn = Option<unsafe extern "C" fn(progress: f32, user: *mut c_void) -> i32>;

pub const LLM_DEVICE_AUTO: i32 = 0;
pub const LLM_DEVICE_CPU: i32 = 1;
pub const LLM_DEVICE_CUDA: i32 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_model_params {
    pub struct_size: u32,
    pub vocab_only: i32,
    pub n_threads: i32,
    pub reserved0: u32,
    pub progress: llm_progress_fn,
    pub progress_user: *mut c_void,
    // ---- 0.2 ----
    pub kv_budget_bytes: u64,
    pub deterministic: i32,
    pub batch_tokens: i32,
    // ---- 0.3 ----
    pub device: i32,
    pub device_index: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llm_model_info {
    pub struct_size: u32,
    pub vocab_only: i32,
    pub n_params: u64,
    pub n_ctx_train: i32,
    pub n_vocab: i32,
    pub n_layer: i32,
    pub n_embd: i32,
    pub n_head: i32,
    pub n_head_kv: i32,
    pub bos_token: llm_token,
    pub eos_token: llm_token,
    pub eot_token: llm_token,
    pub pad_token: llm_token,
    pub add_bos: i32,
    pub architecture: [c_char; 32],
    pub name: [c_char; 128],
    // ---- 0.3 ----
    pub device: i32,
    pub device_index: i32,
    pub mapped_weight_bytes: u64,
    pub weight_copy_bytes: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_kv_stats {
    pub struct_size: u32,
    pub block_tokens: u32,
    pub budget_bytes: u64,
    pub block_bytes: u64,
    pub block_overhead_bytes: u64,
    pub blocks_total: u64,
    pub blocks_allocated: u64,
    pub blocks_used: u64,
    pub blocks_shared: u64,
    pub blocks_cached: u64,
    pub prefix_hits: u64,
    pub bytes_per_token_f16: u64,
    pub bytes_per_token_f32: u64,
    pub n_pools: u32,
    pub local_window: u32,
    pub local_budget_bytes: u64,
    pub local_block_bytes: u64,
    pub local_blocks_total: u64,
    pub local_blocks_allocated: u64,
    pub local_blocks_used: u64,
    pub local_blocks_shared: u64,
    pub local_blocks_cached: u64,
    pub local_prefix_hits: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_batch_stats {
    pub struct_size: u32,
    pub reserved0: u32,
    pub iterations: u64,
    pub decode_iterations: u64,
    pub decode_rows: u64,
    pub prefill_chunks: u64,
    pub tokens: u64,
    pub max_sessions_in_pass: u64,
    pub steps_completed: u64,
    pub steps_failed: u64,
}

// ---- chat templates --------------------------------------------------------
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_chat_message {
    pub role: *const c_char,
    pub content: *const c_char,
}

pub const LLM_CHAT_THINKING_DEFAULT: i32 = 0;
pub const LLM_CHAT_THINKING_ON: i32 = 1;
pub const LLM_CHAT_THINKING_OFF: i32 = 2;

/// Sized (0.3): fill with `llm_chat_options_init_v`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_chat_options {
    pub struct_size: u32,
    pub add_generation_prompt: i32,
    pub enable_thinking: i32,
    pub date_string: *const c_char,
    pub bos_token: *const c_char,
    pub eos_token: *const c_char,
}

// ---- sessions --------------------------------------------------------------
pub const LLM_KV_F16: i32 = 0;
pub const LLM_KV_F32: i32 = 1;

/// Frozen (embedded by value in `llm_session_params`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_sampler_params {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub penalty_last_n: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_sampler_ext {
    pub struct_size: u32,
    pub reserved0: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_session_params {
    pub struct_size: u32,
    pub n_ctx: i32,
    pub kv_type: i32,
    pub n_threads: i32,
    pub seed: u64,
    pub sampler: llm_sampler_params,
    // ---- 0.3 ----
    pub sampler_ext: *const llm_sampler_ext,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_session_stats {
    pub struct_size: u32,
    pub reserved0: u32,
    pub iterations: u64,
    pub prefill_chunks: u64,
    pub cached_tokens: u64,
}

// ---- streaming generation --------------------------------------------------
/// Runs on the thread that called `llm_generate`, inside that call. Return
/// non-zero to stop.
pub type llm_piece_fn =
    Option<unsafe extern "C" fn(text: *const c_char, len: usize, user: *mut c_void) -> i32>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_generate_params {
    pub struct_size: u32,
    pub max_tokens: i32,
    pub stop: *const *const c_char,
    pub n_stop: usize,
    pub on_piece: llm_piece_fn,
    pub user: *mut c_void,
}

pub const LLM_STOP_EOG: i32 = 0;
pub const LLM_STOP_MAX_TOKENS: i32 = 1;
pub const LLM_STOP_STRING: i32 = 2;
pub const LLM_STOP_CALLBACK: i32 = 3;
pub const LLM_STOP_CONTEXT_FULL: i32 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_generate_result {
    pub struct_size: u32,
    pub stop_reason: i32,
    pub n_prompt_tokens: i32,
    pub n_generated: i32,
    pub prefill_ms: f64,
    pub decode_ms: f64,
}

// One declaration per function of llm.h, in the header's order; the test
// parses this block, so keep one `pub fn` per declaration.
extern "C" {
    pub fn llm_status_string(status: llm_status) -> *const c_char;
    pub fn llm_last_error() -> *const c_char;
    pub fn llm_version() -> *const c_char;
    pub fn llm_set_log_callback(fn_: llm_log_fn, user: *mut c_void, min_level: i32) -> llm_status;

    pub fn llm_model_params_init_v(params: *mut llm_model_params, struct_size: usize)
        -> llm_status;
    pub fn llm_model_params_init(params: *mut llm_model_params) -> llm_status;
    pub fn llm_model_load(
        path: *const c_char,
        params: *const llm_model_params,
        out_model: *mut *mut llm_model,
    ) -> llm_status;
    pub fn llm_model_load_from_memory(
        data: *const c_void,
        size: usize,
        params: *const llm_model_params,
        out_model: *mut *mut llm_model,
    ) -> llm_status;
    pub fn llm_model_free(model: *mut llm_model);
    pub fn llm_model_info_init_v(info: *mut llm_model_info, struct_size: usize) -> llm_status;
    pub fn llm_model_info_init(info: *mut llm_model_info) -> llm_status;
    pub fn llm_model_get_info(model: *const llm_model, info: *mut llm_model_info) -> llm_status;
    pub fn llm_model_chat_template(
        model: *const llm_model,
        buf: *mut c_char,
        capacity: usize,
        len_out: *mut usize,
    ) -> llm_status;
    pub fn llm_token_is_eog(model: *const llm_model, token: llm_token, out: *mut i32)
        -> llm_status;
    pub fn llm_kv_stats_init_v(stats: *mut llm_kv_stats, struct_size: usize) -> llm_status;
    pub fn llm_kv_stats_init(stats: *mut llm_kv_stats) -> llm_status;
    pub fn llm_model_kv_stats(model: *const llm_model, stats: *mut llm_kv_stats) -> llm_status;
    pub fn llm_batch_stats_init_v(stats: *mut llm_batch_stats, struct_size: usize) -> llm_status;
    pub fn llm_batch_stats_init(stats: *mut llm_batch_stats) -> llm_status;
    pub fn llm_model_batch_stats(
        model: *const llm_model,
        stats: *mut llm_batch_stats,
    ) -> llm_status;

    pub fn llm_tokenize(
        model: *const llm_model,
        text: *const c_char,
        len: usize,
        add_special: i32,
        parse_special: i32,
        tokens: *mut llm_token,
        capacity: usize,
        n_out: *mut usize,
    ) -> llm_status;
    pub fn llm_token_to_piece(
        model: *const llm_model,
        token: llm_token,
        render_special: i32,
        buf: *mut c_char,
        capacity: usize,
        len_out: *mut usize,
    ) -> llm_status;
    pub fn llm_detokenize(
        model: *const llm_model,
        tokens: *const llm_token,
        n_tokens: usize,
        render_special: i32,
        buf: *mut c_char,
        capacity: usize,
        len_out: *mut usize,
    ) -> llm_status;

    pub fn llm_chat_format_v(
        model: *const llm_model,
        template_name: *const c_char,
        messages: *const llm_chat_message,
        n_messages: usize,
        message_size: usize,
        add_generation_prompt: i32,
        buf: *mut c_char,
        capacity: usize,
        len_out: *mut usize,
    ) -> llm_status;
    pub fn llm_chat_options_init_v(options: *mut llm_chat_options, struct_size: usize)
        -> llm_status;
    pub fn llm_chat_format_ex(
        model: *const llm_model,
        template_name: *const c_char,
        messages: *const llm_chat_message,
        n_messages: usize,
        message_size: usize,
        options: *const llm_chat_options,
        buf: *mut c_char,
        capacity: usize,
        len_out: *mut usize,
    ) -> llm_status;
    pub fn llm_chat_format(
        model: *const llm_model,
        template_name: *const c_char,
        messages: *const llm_chat_message,
        n_messages: usize,
        add_generation_prompt: i32,
        buf: *mut c_char,
        capacity: usize,
        len_out: *mut usize,
    ) -> llm_status;

    pub fn llm_sampler_params_init_v(
        params: *mut llm_sampler_params,
        struct_size: usize,
    ) -> llm_status;
    pub fn llm_sampler_params_init(params: *mut llm_sampler_params) -> llm_status;
    pub fn llm_sampler_ext_init_v(ext: *mut llm_sampler_ext, struct_size: usize) -> llm_status;
    pub fn llm_session_params_init_v(
        params: *mut llm_session_params,
        struct_size: usize,
    ) -> llm_status;
    pub fn llm_session_params_init(params: *mut llm_session_params) -> llm_status;
    pub fn llm_session_create(
        model: *mut llm_model,
        params: *const llm_session_params,
        out_session: *mut *mut llm_session,
    ) -> llm_status;
    pub fn llm_session_free(session: *mut llm_session);
    pub fn llm_session_prefill(
        session: *mut llm_session,
        tokens: *const llm_token,
        n: usize,
    ) -> llm_status;
    pub fn llm_session_decode(session: *mut llm_session, out_token: *mut llm_token) -> llm_status;
    pub fn llm_session_logits(
        session: *const llm_session,
        out_logits: *mut *const f32,
        n_vocab_out: *mut usize,
    ) -> llm_status;
    pub fn llm_session_n_tokens(session: *const llm_session, n_out: *mut usize) -> llm_status;
    pub fn llm_session_set_sampler(
        session: *mut llm_session,
        params: *const llm_sampler_params,
    ) -> llm_status;
    pub fn llm_session_reset(session: *mut llm_session) -> llm_status;
    pub fn llm_session_set_seed(session: *mut llm_session, seed: u64) -> llm_status;

    pub fn llm_session_prefill_async(
        session: *mut llm_session,
        tokens: *const llm_token,
        n: usize,
    ) -> llm_status;
    pub fn llm_session_decode_async(session: *mut llm_session) -> llm_status;
    pub fn llm_session_poll(
        session: *mut llm_session,
        done: *mut i32,
        out_token: *mut llm_token,
    ) -> llm_status;
    pub fn llm_session_wait(session: *mut llm_session, out_token: *mut llm_token) -> llm_status;

    pub fn llm_session_cancel(session: *mut llm_session) -> llm_status;
    pub fn llm_session_rewind(session: *mut llm_session, n_tokens: usize) -> llm_status;
    pub fn llm_session_fork(
        parent: *mut llm_session,
        out_child: *mut *mut llm_session,
    ) -> llm_status;
    pub fn llm_session_save(
        session: *mut llm_session,
        buf: *mut c_void,
        capacity: usize,
        size_out: *mut usize,
    ) -> llm_status;
    pub fn llm_session_load(
        session: *mut llm_session,
        buf: *const c_void,
        size: usize,
    ) -> llm_status;
    pub fn llm_session_stats_init_v(
        stats: *mut llm_session_stats,
        struct_size: usize,
    ) -> llm_status;
    pub fn llm_session_stats_init(stats: *mut llm_session_stats) -> llm_status;
    pub fn llm_session_get_stats(
        session: *const llm_session,
        stats: *mut llm_session_stats,
    ) -> llm_status;

    pub fn llm_generate_params_init_v(
        params: *mut llm_generate_params,
        struct_size: usize,
    ) -> llm_status;
    pub fn llm_generate_params_init(params: *mut llm_generate_params) -> llm_status;
    pub fn llm_generate_result_init_v(
        result: *mut llm_generate_result,
        struct_size: usize,
    ) -> llm_status;
    pub fn llm_generate_result_init(result: *mut llm_generate_result) -> llm_status;
    pub fn llm_generate(
        session: *mut llm_session,
        prompt: *const llm_token,
        n: usize,
        params: *const llm_generate_params,
        result: *mut llm_generate_result,
    ) -> llm_status;
}
