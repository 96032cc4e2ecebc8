"""Python binding of libllm (ctypes, no compiled extension).

    import libllm
    with libllm.Model("model.gguf") as model, model.session(temperature=0) as s:
        for piece in s.stream("Once upon a time", max_tokens=32):
            print(piece, end="", flush=True)

Every failing call raises LlmError (status, status_name, message). Objects
are context managers; a closed object raises LlmError(ERR_INVALID_ARGUMENT),
never crashes.

Threads: a Model may be used from any number of threads; a Session serves one
call at a time (a concurrent call raises LlmError with ERR_BUSY), except
cancel(), stats() and close(), which any thread may call at any time. ctypes
releases the GIL during every libllm call, so sessions driven from several
Python threads run concurrently (the library batches their steps).
Callbacks: on_piece (generate) and progress (Model) run on the thread that
made the call, inside it; the log callback (set_log_callback) may run on any
libllm thread. An exception raised in a callback stops the call and is
re-raised by it.
"""

import codecs
import ctypes
import threading

from . import _native as N

__all__ = ["LlmError", "LlmVersionError", "Model", "Session", "Generation", "version",
           "set_log_callback", "library"]

# Status codes (llm.h; values are never renumbered).
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_IO = 2
ERR_BAD_MODEL = 3
ERR_UNSUPPORTED = 4
ERR_OUT_OF_MEMORY = 5
ERR_CONTEXT_FULL = 6
ERR_KV_FULL = 7
ERR_CANCELLED = 8
ERR_BUFFER_TOO_SMALL = 9
ERR_BUSY = 10
ERR_DEVICE = 11
ERR_INTERNAL = 12

STOP_EOG, STOP_MAX_TOKENS, STOP_STRING, STOP_CALLBACK, STOP_CONTEXT_FULL = range(5)
KV_F16, KV_F32 = 0, 1
LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR = range(4)


class LlmError(Exception):
    """A libllm call failed: status (int), status_name ("LLM_ERR_IO"), message."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = _status_name(status)
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


class LlmVersionError(RuntimeError):
    """The libllm found is not the version this binding was written for."""


_lib_lock = threading.Lock()
_lib_obj = None


def _status_name(status):
    if _lib_obj is not None:
        return _lib_obj.llm_status_string(status).decode()
    return "status %d" % status


def check_version(version_string, written_for=N.WRITTEN_FOR):
    """Raise LlmVersionError unless a library of version_string ("0.3.1")
    keeps the ABI of written_for ((major, minor)): 0.x needs the same major
    and minor, later versions the same major and at least that minor."""
    try:
        major, minor = (int(x) for x in version_string.split(".")[:2])
    except ValueError:
        raise LlmVersionError("libllm reports an unreadable version %r (this binding was "
                              "written for libllm %d.%d)" % ((version_string,) + tuple(written_for)))
    want_major, want_minor = written_for
    ok = major == want_major and (minor == want_minor if major == 0 else minor >= want_minor)
    if not ok:
        raise LlmVersionError(
            "libllm %s is not compatible with this Python binding, written for libllm %d.%d "
            "(needs %s); install the binding of that library version or point LLM_LIB_DIR "
            "at a libllm %d.%d" % (version_string, want_major, want_minor,
                                   "the same major and minor" if want_major == 0 else
                                   "the same major version", want_major, want_minor))


def library():
    """The loaded libllm (ctypes.CDLL), opened and version-checked once."""
    global _lib_obj
    if _lib_obj is None:
        with _lib_lock:
            if _lib_obj is None:
                lib = N.load_library()
                check_version(lib.llm_version().decode())
                _lib_obj = lib
    return _lib_obj


def version():
    """The library's version string, e.g. "0.3.0"."""
    return library().llm_version().decode()


def _check(status):
    """Raise LlmError for a failed call. Must run right after the call, on its
    thread: llm_last_error() is thread-local and valid until the next call."""
    if status != OK:
        lib = _lib_obj
        ptr = lib.llm_last_error()
        message = ctypes.string_at(ptr).decode("utf-8", "replace") if ptr else ""
        raise LlmError(status, message)


def _closed(what):
    return LlmError(ERR_INVALID_ARGUMENT, "%s is closed" % what)


def _init(struct_type, init_name):
    s = struct_type()
    _check(getattr(library(), init_name)(ctypes.byref(s), ctypes.sizeof(struct_type)))
    return s


def _as_dict(struct):
    return {name: getattr(struct, name) for name, _ in struct._fields_
            if name not in ("struct_size",) and not name.startswith("reserved")}


_log_keepalive = None


def set_log_callback(fn, min_level=LOG_WARN):
    """Install fn(level, message) as libllm's log sink (None: discard). fn may
    be called from any libllm thread."""
    global _log_keepalive
    lib = library()
    if fn is None:
        cb = N.LOG_FN()
    else:
        def cb_impl(level, message, _user):
            try:
                fn(level, message.decode("utf-8", "replace"))
            except Exception:  # never let an exception reach C
                pass
        cb = N.LOG_FN(cb_impl)
    _check(lib.llm_set_log_callback(cb, None, min_level))
    _log_keepalive = cb  # the library holds the pointer: keep the thunk alive


class Model:
    """A loaded GGUF model. Thread-safe; close() (or `with`) releases the
    caller's reference (sessions keep their own)."""

    def __init__(self, path, *, vocab_only=False, n_threads=0, kv_budget_bytes=0,
                 deterministic=False, batch_tokens=0, progress=None):
        lib = library()
        params = _init(N.ModelParams, "llm_model_params_init_v")
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
        _check(status)
        self._h = handle.value
        self._eog_cache = {}

    @property
    def handle(self):
        if self._h is None:
            raise _closed("model")
        return self._h

    def close(self):
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            library().llm_model_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def info(self):
        info = _init(N.ModelInfo, "llm_model_info_init_v")
        _check(library().llm_model_get_info(self.handle, ctypes.byref(info)))
        d = _as_dict(info)
        d["architecture"] = info.architecture.decode()
        d["name"] = info.name.decode("utf-8", "replace")
        return d

    def kv_stats(self):
        stats = _init(N.KvStats, "llm_kv_stats_init_v")
        _check(library().llm_model_kv_stats(self.handle, ctypes.byref(stats)))
        return _as_dict(stats)

    def batch_stats(self):
        stats = _init(N.BatchStats, "llm_batch_stats_init_v")
        _check(library().llm_model_batch_stats(self.handle, ctypes.byref(stats)))
        return _as_dict(stats)

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
            _check(status)
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
        _check(status)
        return buf.raw[:n.value]

    def detokenize(self, tokens, render_special=False):
        lib = library()
        arr = (N.llm_token * len(tokens))(*tokens)
        n = ctypes.c_size_t()
        status = lib.llm_detokenize(self.handle, arr, len(tokens), int(render_special), None, 0,
                                    ctypes.byref(n))
        if status not in (OK, ERR_BUFFER_TOO_SMALL):
            _check(status)
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(lib.llm_detokenize(self.handle, arr, len(tokens), int(render_special), buf,
                                  n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8", "replace")

    def is_eog(self, token):
        cached = self._eog_cache.get(token)
        if cached is None:
            out = ctypes.c_int32()
            _check(library().llm_token_is_eog(self.handle, token, ctypes.byref(out)))
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
            _check(status)
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(lib.llm_chat_format_v(self.handle, name, arr, len(pairs),
                                     ctypes.sizeof(N.ChatMessage), int(add_generation_prompt),
                                     buf, n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8", "replace")

    def session(self, **kwargs):
        """A new Session (keyword arguments: see Session)."""
        return Session(self, **kwargs)


_SAMPLER_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty",
                   "presence_penalty", "frequency_penalty", "penalty_last_n")


class Generation:
    """Result of Session.generate."""

    def __init__(self, text, result):
        self.text = text
        self.stop_reason = result.stop_reason
        self.n_prompt_tokens = result.n_prompt_tokens
        self.n_generated = result.n_generated
        self.prefill_ms = result.prefill_ms
        self.decode_ms = result.decode_ms

    def __repr__(self):
        return "Generation(text=%r, stop_reason=%d, n_generated=%d)" % (
            self.text, self.stop_reason, self.n_generated)


class Session:
    """A conversation state on a model: history, KV cache, sampler.

    Sampler settings (temperature, top_k, top_p, min_p, repeat_penalty,
    presence_penalty, frequency_penalty, penalty_last_n) default to the
    library's; temperature=0 is greedy."""

    def __init__(self, model, *, n_ctx=0, kv_type=KV_F16, seed=0, _handle=None, **sampler):
        self._model = model
        if _handle is not None:
            self._h = _handle
            return
        params = _init(N.SessionParams, "llm_session_params_init_v")
        params.n_ctx = n_ctx
        params.kv_type = kv_type
        params.seed = seed
        for key, value in sampler.items():
            if key not in _SAMPLER_FIELDS:
                raise TypeError("unknown sampler setting %r" % key)
            setattr(params.sampler, key, value)
        handle = N.c_void_p()
        _check(library().llm_session_create(model.handle, ctypes.byref(params),
                                            ctypes.byref(handle)))
        self._h = handle.value

    @property
    def model(self):
        return self._model

    @property
    def handle(self):
        if self._h is None:
            raise _closed("session")
        return self._h

    def close(self):
        """Free the session. Safe from any thread, also while another thread
        runs a call on it: that call stops and the memory goes when it returns."""
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            library().llm_session_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _tokens(self, prompt):
        if isinstance(prompt, (str, bytes)):
            return self._model.tokenize(prompt)
        return list(prompt)

    # ---- blocking steps ----
    def prefill(self, prompt):
        tokens = self._tokens(prompt)
        arr = (N.llm_token * len(tokens))(*tokens)
        _check(library().llm_session_prefill(self.handle, arr, len(tokens)))

    def decode(self):
        """Sample, append and run one token; returns it."""
        out = N.llm_token()
        _check(library().llm_session_decode(self.handle, ctypes.byref(out)))
        return out.value

    def logits(self):
        """A copy of the next-token logits (list of n_vocab floats)."""
        ptr = ctypes.POINTER(ctypes.c_float)()
        n = ctypes.c_size_t()
        _check(library().llm_session_logits(self.handle, ctypes.byref(ptr), ctypes.byref(n)))
        return ptr[:n.value]

    @property
    def n_tokens(self):
        n = ctypes.c_size_t()
        _check(library().llm_session_n_tokens(self.handle, ctypes.byref(n)))
        return n.value

    def set_sampler(self, **sampler):
        params = _init(N.SamplerParams, "llm_sampler_params_init_v")
        for key, value in sampler.items():
            if key not in _SAMPLER_FIELDS:
                raise TypeError("unknown sampler setting %r" % key)
            setattr(params, key, value)
        _check(library().llm_session_set_sampler(self.handle, ctypes.byref(params)))

    def reset(self):
        _check(library().llm_session_reset(self.handle))

    def set_seed(self, seed):
        _check(library().llm_session_set_seed(self.handle, seed))

    def rewind(self, n_tokens):
        _check(library().llm_session_rewind(self.handle, n_tokens))

    def cancel(self):
        """Latch a cancel (any thread): the running or next model call raises
        LlmError(ERR_CANCELLED) and leaves the session as it was."""
        _check(library().llm_session_cancel(self.handle))

    def fork(self):
        """A new Session sharing this one's history and KV blocks."""
        handle = N.c_void_p()
        _check(library().llm_session_fork(self.handle, ctypes.byref(handle)))
        return Session(self._model, _handle=handle.value)

    def save(self):
        lib = library()
        n = ctypes.c_size_t()
        status = lib.llm_session_save(self.handle, None, 0, ctypes.byref(n))
        if status != ERR_BUFFER_TOO_SMALL:
            _check(status)
        buf = ctypes.create_string_buffer(n.value)
        _check(lib.llm_session_save(self.handle, buf, n.value, ctypes.byref(n)))
        return buf.raw[:n.value]

    def load(self, data):
        data = bytes(data)
        _check(library().llm_session_load(self.handle, data, len(data)))

    def stats(self):
        stats = _init(N.SessionStats, "llm_session_stats_init_v")
        _check(library().llm_session_get_stats(self.handle, ctypes.byref(stats)))
        return _as_dict(stats)

    # ---- non-blocking steps (game loops) ----
    def prefill_async(self, prompt):
        tokens = self._tokens(prompt)
        arr = (N.llm_token * len(tokens))(*tokens)
        _check(library().llm_session_prefill_async(self.handle, arr, len(tokens)))

    def decode_async(self):
        _check(library().llm_session_decode_async(self.handle))

    def poll(self):
        """Never blocks. (False, None) while the step runs; (True, token) once
        it ended (token None for a prefill); raises LlmError if it failed."""
        done = ctypes.c_int32()
        token = N.llm_token(-1)
        _check(library().llm_session_poll(self.handle, ctypes.byref(done), ctypes.byref(token)))
        if not done.value:
            return False, None
        return True, (token.value if token.value >= 0 else None)

    def wait(self):
        token = N.llm_token(-1)
        _check(library().llm_session_wait(self.handle, ctypes.byref(token)))
        return token.value if token.value >= 0 else None

    # ---- generation ----
    def generate(self, prompt, max_tokens=256, stop=(), on_piece=None):
        """Prefill prompt (str, bytes or token ids; may be empty to continue)
        and decode until an end-of-generation token, a stop string, max_tokens
        or on_piece returning True. Returns a Generation. on_piece(text) runs
        on this thread, inside the call."""
        lib = library()
        tokens = self._tokens(prompt) if prompt else []
        arr = (N.llm_token * max(1, len(tokens)))(*tokens)
        params = _init(N.GenerateParams, "llm_generate_params_init_v")
        params.max_tokens = max_tokens
        stops = [s.encode() for s in stop]
        stop_arr = (N.c_char_p * max(1, len(stops)))(*stops)
        if stops:
            params.stop = ctypes.cast(stop_arr, ctypes.POINTER(N.c_char_p))
            params.n_stop = len(stops)
        pieces, failure = [], []

        def piece_impl(text, length, _user):
            try:
                piece = ctypes.string_at(text, length).decode("utf-8", "replace")
                pieces.append(piece)
                return 1 if (on_piece is not None and on_piece(piece)) else 0
            except BaseException as e:  # stop the generation, re-raise below
                failure.append(e)
                return 1

        params.on_piece = N.PIECE_FN(piece_impl)
        result = _init(N.GenerateResult, "llm_generate_result_init_v")
        status = lib.llm_generate(self.handle, arr, len(tokens), ctypes.byref(params),
                                  ctypes.byref(result))
        if failure:
            raise failure[0]
        _check(status)
        return Generation("".join(pieces), result)

    def tokens(self, prompt=None, max_tokens=256):
        """Iterator of generated token ids (blocking decode steps on this
        thread; stops at an end-of-generation token, which is not yielded,
        or after max_tokens). prompt None: continue from the current logits."""
        if prompt is not None:
            self.prefill(prompt)
        for _ in range(max_tokens):
            token = self.decode()
            if self._model.is_eog(token):
                return
            yield token

    def stream(self, prompt=None, max_tokens=256):
        """Iterator of UTF-8-complete text pieces of the generated tokens."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for token in self.tokens(prompt, max_tokens):
            text = decoder.decode(self._model.token_bytes(token))
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
