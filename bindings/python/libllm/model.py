"""libllm models: loading, metadata, tokenizer, chat templates."""

import ctypes

from . import _native as N
from ._errors import ERR_BUFFER_TOO_SMALL, OK
from ._handle import NativeHandle
from ._library import as_dict, check, init_struct, library
from .session import Session

class Model(NativeHandle):
    """A loaded GGUF model. Thread-safe; close() (or `with`) releases the
    caller's reference (sessions keep their own)."""

    _KIND = "model"
    _FREE = "llm_model_free"

    def __init__(self, path, *, vocab_only=False, n_threads=0, kv_budget_bytes=0,
                 deterministic=False, batch_tokens=0, progress=None):
        lib = library()
        params = init_struct(N.ModelParams, "llm_model_params_init_v")
        params.vocab_only = int(vocab_only)
        params.n_threads = n_threads
        params.kv_budget_bytes = kv_budget_bytes
        params.deterministic = int(deterministic)
        params.batch_tokens = batch_tokens
        failure = []
        if progress is not None:
            def progress_impl(fraction, _user):
                try:
                    return 1 if progress(fraction) else 0
                except BaseException as e:  # stop the load, re-raise below
                    failure.append(e)
                    return 1
            params.progress = N.PROGRESS_FN(progress_impl)
        handle = N.c_void_p()
        status = lib.llm_model_load(str(path).encode(), ctypes.byref(params),
                                    ctypes.byref(handle))
        if failure:
            raise failure[0]
        check(status)
        self._h = handle.value
        self._eog_cache = {}

    def info(self):
        info = init_struct(N.ModelInfo, "llm_model_info_init_v")
        check(library().llm_model_get_info(self.handle, ctypes.byref(info)))
        d = as_dict(info)
        d["architecture"] = info.architecture.decode()
        d["name"] = info.name.decode("utf-8", "replace")
        return d

    def kv_stats(self):
        stats = init_struct(N.KvStats, "llm_kv_stats_init_v")
        check(library().llm_model_kv_stats(self.handle, ctypes.byref(stats)))
        return as_dict(stats)

    def batch_stats(self):
        stats = init_struct(N.BatchStats, "llm_batch_stats_init_v")
        check(library().llm_model_batch_stats(self.handle, ctypes.byref(stats)))
        return as_dict(stats)

    def tokenize(self, text, add_special=True, parse_special=False):
        """UTF-8 text (str or bytes) -> list of token ids."""
        lib = library()
        data = text.encode() if isinstance(text, str) else bytes(text)
        n = ctypes.c_size_t()
        capacity = len(data) + 8
        while True:
            buf = (N.llm_token * capacity)()
            status = lib.llm_tokenize(self.handle, data, len(data), int(add_special),
                                      int(parse_special), buf, capacity, ctypes.byref(n))
            if status == ERR_BUFFER_TOO_SMALL and n.value > capacity:
                capacity = n.value
                continue
            check(status)
            return list(buf[:n.value])

    def token_bytes(self, token, render_special=False):
        """The bytes of one token (possibly part of a UTF-8 sequence)."""
        lib = library()
        n = ctypes.c_size_t()
        buf = ctypes.create_string_buffer(64)
        status = lib.llm_token_to_piece(self.handle, token, int(render_special), buf, 64,
                                        ctypes.byref(n))
        if status == ERR_BUFFER_TOO_SMALL:
            buf = ctypes.create_string_buffer(n.value)
            status = lib.llm_token_to_piece(self.handle, token, int(render_special), buf,
                                            n.value, ctypes.byref(n))
        check(status)
        return buf.raw[:n.value]

    def detokenize(self, tokens, render_special=False):
        lib = library()
        arr = (N.llm_token * len(tokens))(*tokens)
        n = ctypes.c_size_t()
        status = lib.llm_detokenize(self.handle, arr, len(tokens), int(render_special), None, 0,
                                    ctypes.byref(n))
        if status not in (OK, ERR_BUFFER_TOO_SMALL):
            check(status)
        buf = ctypes.create_string_buffer(n.value + 1)
        check(lib.llm_detokenize(self.handle, arr, len(tokens), int(render_special), buf,
                                  n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8", "replace")

    def is_eog(self, token):
        cached = self._eog_cache.get(token)
        if cached is None:
            out = ctypes.c_int32()
            check(library().llm_token_is_eog(self.handle, token, ctypes.byref(out)))
            cached = self._eog_cache[token] = bool(out.value)
        return cached

    def chat_format(self, messages, add_generation_prompt=True, template=None):
        """[(role, content), ...] or [{"role":..., "content":...}] -> prompt text
        (tokenize it with parse_special=True)."""
        lib = library()
        pairs = [(m["role"], m["content"]) if isinstance(m, dict) else m for m in messages]
        arr = (N.ChatMessage * len(pairs))(
            *[N.ChatMessage(r.encode(), c.encode()) for r, c in pairs])
        name = template.encode() if template else None
        n = ctypes.c_size_t()
        status = lib.llm_chat_format_v(self.handle, name, arr, len(pairs),
                                       ctypes.sizeof(N.ChatMessage), int(add_generation_prompt),
                                       None, 0, ctypes.byref(n))
        if status not in (OK, ERR_BUFFER_TOO_SMALL):
            check(status)
        buf = ctypes.create_string_buffer(n.value + 1)
        check(lib.llm_chat_format_v(self.handle, name, arr, len(pairs),
                                     ctypes.sizeof(N.ChatMessage), int(add_generation_prompt),
                                     buf, n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8", "replace")

    def session(self, **kwargs):
        """A new Session (keyword arguments: see Session)."""
        return Session(self, **kwargs)
