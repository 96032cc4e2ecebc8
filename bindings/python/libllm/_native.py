"""Raw ctypes declarations of include/llm/llm.h (0.3) and the library loader.

Nothing here is meant for users: libllm/__init__.py wraps it. Struct layouts
are those of the 0.3 header (docs/ABI.md, "Historical sizes"); the binding
passes ctypes.sizeof(struct) to every llm_*_init_v, because the unsized init
names are C macros that ctypes cannot expand.
"""

import ctypes
import ctypes.util
import os

# The header version this binding was written against. docs/ABI.md: 0.x
# releases may change the ABI between minors, so a 0.x library must have the
# same major and minor; from 1.0 on, the same major and at least this minor.
WRITTEN_FOR = (0, 3)

c_size_t = ctypes.c_size_t
c_int32 = ctypes.c_int32
c_uint32 = ctypes.c_uint32
c_uint64 = ctypes.c_uint64
llm_token = ctypes.c_int32
llm_status = ctypes.c_int32
c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p

# Callback types. CFUNCTYPE callbacks take the GIL themselves, so they may be
# called on any thread (the log sink is; progress and on_piece run on the
# thread that made the call).
LOG_FN = ctypes.CFUNCTYPE(None, c_int32, c_char_p, c_void_p)
PROGRESS_FN = ctypes.CFUNCTYPE(c_int32, ctypes.c_float, c_void_p)
# `text` is not NUL-terminated: declared as a void pointer and read with
# ctypes.string_at(text, length).
PIECE_FN = ctypes.CFUNCTYPE(c_int32, c_void_p, c_size_t, c_void_p)


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("vocab_only", c_int32),
        ("n_threads", c_int32),
        ("reserved0", c_uint32),
        ("progress", PROGRESS_FN),
        ("progress_user", c_void_p),
        ("kv_budget_bytes", c_uint64),
        ("deterministic", c_int32),
        ("batch_tokens", c_int32),
        ("device", c_int32),
        ("device_index", c_int32),
    ]


class ModelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("vocab_only", c_int32),
        ("n_params", c_uint64),
        ("n_ctx_train", c_int32),
        ("n_vocab", c_int32),
        ("n_layer", c_int32),
        ("n_embd", c_int32),
        ("n_head", c_int32),
        ("n_head_kv", c_int32),
        ("bos_token", llm_token),
        ("eos_token", llm_token),
        ("eot_token", llm_token),
        ("pad_token", llm_token),
        ("add_bos", c_int32),
        ("architecture", ctypes.c_char * 32),
        ("name", ctypes.c_char * 128),
        ("device", c_int32),
        ("device_index", c_int32),
        ("mapped_weight_bytes", c_uint64),
        ("weight_copy_bytes", c_uint64),
    ]


class KvStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("block_tokens", c_uint32),
        ("budget_bytes", c_uint64),
        ("block_bytes", c_uint64),
        ("block_overhead_bytes", c_uint64),
        ("blocks_total", c_uint64),
        ("blocks_allocated", c_uint64),
        ("blocks_used", c_uint64),
        ("blocks_shared", c_uint64),
        ("blocks_cached", c_uint64),
        ("prefix_hits", c_uint64),
        ("bytes_per_token_f16", c_uint64),
        ("bytes_per_token_f32", c_uint64),
        ("n_pools", c_uint32),
        ("local_window", c_uint32),
        ("local_budget_bytes", c_uint64),
        ("local_block_bytes", c_uint64),
        ("local_blocks_total", c_uint64),
        ("local_blocks_allocated", c_uint64),
        ("local_blocks_used", c_uint64),
        ("local_blocks_shared", c_uint64),
        ("local_blocks_cached", c_uint64),
        ("local_prefix_hits", c_uint64),
    ]


class BatchStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("iterations", c_uint64),
        ("decode_iterations", c_uint64),
        ("decode_rows", c_uint64),
        ("prefill_chunks", c_uint64),
        ("tokens", c_uint64),
        ("max_sessions_in_pass", c_uint64),
        ("steps_completed", c_uint64),
        ("steps_failed", c_uint64),
    ]


class SamplerParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("temperature", ctypes.c_float),
        ("top_k", c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("penalty_last_n", c_int32),
    ]


class SamplerExt(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved0", c_uint32)]


class SessionParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("n_ctx", c_int32),
        ("kv_type", c_int32),
        ("n_threads", c_int32),
        ("seed", c_uint64),
        ("sampler", SamplerParams),
        ("sampler_ext", ctypes.POINTER(SamplerExt)),
    ]


class SessionStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("iterations", c_uint64),
        ("prefill_chunks", c_uint64),
        ("cached_tokens", c_uint64),
    ]


class GenerateParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_tokens", c_int32),
        ("stop", ctypes.POINTER(c_char_p)),
        ("n_stop", c_size_t),
        ("on_piece", PIECE_FN),
        ("user", c_void_p),
    ]


class GenerateResult(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("stop_reason", c_int32),
        ("n_prompt_tokens", c_int32),
        ("n_generated", c_int32),
        ("prefill_ms", ctypes.c_double),
        ("decode_ms", ctypes.c_double),
    ]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


# Handles are opaque: kept as integers, never dereferenced.
_H = c_void_p
_P = ctypes.POINTER

# name -> (restype, argtypes)
_PROTOTYPES = {
    "llm_status_string": (c_char_p, [llm_status]),
    # c_void_p, not c_char_p: the message is copied by the caller right after
    # the call that failed (it lives until the next libllm call on the thread).
    "llm_last_error": (c_void_p, []),
    "llm_version": (c_char_p, []),
    "llm_set_log_callback": (llm_status, [LOG_FN, c_void_p, c_int32]),
    "llm_model_params_init_v": (llm_status, [_P(ModelParams), c_size_t]),
    "llm_model_load": (llm_status, [c_char_p, _P(ModelParams), _P(_H)]),
    "llm_model_load_from_memory": (llm_status, [c_void_p, c_size_t, _P(ModelParams), _P(_H)]),
    "llm_model_free": (None, [_H]),
    "llm_model_info_init_v": (llm_status, [_P(ModelInfo), c_size_t]),
    "llm_model_get_info": (llm_status, [_H, _P(ModelInfo)]),
    "llm_model_chat_template": (llm_status, [_H, c_char_p, c_size_t, _P(c_size_t)]),
    "llm_token_is_eog": (llm_status, [_H, llm_token, _P(c_int32)]),
    "llm_kv_stats_init_v": (llm_status, [_P(KvStats), c_size_t]),
    "llm_model_kv_stats": (llm_status, [_H, _P(KvStats)]),
    "llm_batch_stats_init_v": (llm_status, [_P(BatchStats), c_size_t]),
    "llm_model_batch_stats": (llm_status, [_H, _P(BatchStats)]),
    "llm_tokenize": (llm_status, [_H, c_char_p, c_size_t, c_int32, c_int32, _P(llm_token),
                                  c_size_t, _P(c_size_t)]),
    "llm_token_to_piece": (llm_status, [_H, llm_token, c_int32, c_char_p, c_size_t,
                                        _P(c_size_t)]),
    "llm_detokenize": (llm_status, [_H, _P(llm_token), c_size_t, c_int32, c_char_p, c_size_t,
                                    _P(c_size_t)]),
    "llm_chat_format_v": (llm_status, [_H, c_char_p, _P(ChatMessage), c_size_t, c_size_t,
                                       c_int32, c_char_p, c_size_t, _P(c_size_t)]),
    "llm_sampler_params_init_v": (llm_status, [_P(SamplerParams), c_size_t]),
    "llm_session_params_init_v": (llm_status, [_P(SessionParams), c_size_t]),
    "llm_session_create": (llm_status, [_H, _P(SessionParams), _P(_H)]),
    "llm_session_free": (None, [_H]),
    "llm_session_prefill": (llm_status, [_H, _P(llm_token), c_size_t]),
    "llm_session_decode": (llm_status, [_H, _P(llm_token)]),
    "llm_session_logits": (llm_status, [_H, _P(_P(ctypes.c_float)), _P(c_size_t)]),
    "llm_session_n_tokens": (llm_status, [_H, _P(c_size_t)]),
    "llm_session_set_sampler": (llm_status, [_H, _P(SamplerParams)]),
    "llm_session_reset": (llm_status, [_H]),
    "llm_session_set_seed": (llm_status, [_H, c_uint64]),
    "llm_session_prefill_async": (llm_status, [_H, _P(llm_token), c_size_t]),
    "llm_session_decode_async": (llm_status, [_H]),
    "llm_session_poll": (llm_status, [_H, _P(c_int32), _P(llm_token)]),
    "llm_session_wait": (llm_status, [_H, _P(llm_token)]),
    "llm_session_cancel": (llm_status, [_H]),
    "llm_session_rewind": (llm_status, [_H, c_size_t]),
    "llm_session_fork": (llm_status, [_H, _P(_H)]),
    "llm_session_save": (llm_status, [_H, c_void_p, c_size_t, _P(c_size_t)]),
    "llm_session_load": (llm_status, [_H, c_void_p, c_size_t]),
    "llm_session_stats_init_v": (llm_status, [_P(SessionStats), c_size_t]),
    "llm_session_get_stats": (llm_status, [_H, _P(SessionStats)]),
    "llm_generate_params_init_v": (llm_status, [_P(GenerateParams), c_size_t]),
    "llm_generate_result_init_v": (llm_status, [_P(GenerateResult), c_size_t]),
    "llm_generate": (llm_status, [_H, _P(llm_token), c_size_t, _P(GenerateParams),
                                  _P(GenerateResult)]),
}


def _candidates():
    """Where the library is looked for, in order."""
    names = ("libllm.so", "libllm.so.0")
    lib_dir = os.environ.get("LLM_LIB_DIR")
    if lib_dir:
        return [os.path.join(lib_dir, n) for n in names]
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.normpath(os.path.join(here, "..", "..", ".."))
    build = os.path.join(repo, os.environ.get("LLM_BUILD_DIR", "build"))
    found = [os.path.join(build, n) for n in names if os.path.exists(os.path.join(build, n))]
    system = ctypes.util.find_library("llm")
    return found + ([system] if system else []) + list(names)


def load_library():
    """Open libllm: $LLM_LIB_DIR if set (only there), else the repository's
    build directory ($LLM_BUILD_DIR, default build/), else the system's
    search path. Raises OSError naming every place tried."""
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    raise OSError("libllm: shared library not found; set LLM_LIB_DIR to the directory of "
                  "libllm.so. Tried: " + "; ".join(tried))
