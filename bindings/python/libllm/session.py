"""libllm sessions: blocking and non-blocking steps, generation, streaming."""

import codecs
import ctypes

from . import _native as N
from ._errors import ERR_BUFFER_TOO_SMALL, KV_F16
from ._handle import NativeHandle
from ._library import as_dict, check, init_struct, library

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


class Session(NativeHandle):
    """A conversation state on a model: history, KV cache, sampler.

    Sampler settings (temperature, top_k, top_p, min_p, repeat_penalty,
    presence_penalty, frequency_penalty, penalty_last_n) default to the
    library's; temperature=0 is greedy."""

    _KIND = "session"
    _FREE = "llm_session_free"

    def __init__(self, model, *, n_ctx=0, kv_type=KV_F16, seed=0, _handle=None, **sampler):
        self._model = model
        if _handle is not None:
            self._h = _handle
            return
        params = init_struct(N.SessionParams, "llm_session_params_init_v")
        params.n_ctx = n_ctx
        params.kv_type = kv_type
        params.seed = seed
        for key, value in sampler.items():
            if key not in _SAMPLER_FIELDS:
                raise TypeError("unknown sampler setting %r" % key)
            setattr(params.sampler, key, value)
        handle = N.c_void_p()
        check(library().llm_session_create(model.handle, ctypes.byref(params),
                                            ctypes.byref(handle)))
        self._h = handle.value

    @property
    def model(self):
        return self._model

    def _tokens(self, prompt):
        if isinstance(prompt, (str, bytes)):
            return self._model.tokenize(prompt)
        return list(prompt)

    # ---- blocking steps ----
    def prefill(self, prompt):
        tokens = self._tokens(prompt)
        arr = (N.llm_token * len(tokens))(*tokens)
        check(library().llm_session_prefill(self.handle, arr, len(tokens)))

    def decode(self):
        """Sample, append and run one token; returns it."""
        out = N.llm_token()
        check(library().llm_session_decode(self.handle, ctypes.byref(out)))
        return out.value

    def logits(self):
        """A copy of the next-token logits (list of n_vocab floats)."""
        ptr = ctypes.POINTER(ctypes.c_float)()
        n = ctypes.c_size_t()
        check(library().llm_session_logits(self.handle, ctypes.byref(ptr), ctypes.byref(n)))
        return ptr[:n.value]

    @property
    def n_tokens(self):
        n = ctypes.c_size_t()
        check(library().llm_session_n_tokens(self.handle, ctypes.byref(n)))
        return n.value

    def set_sampler(self, **sampler):
        params = init_struct(N.SamplerParams, "llm_sampler_params_init_v")
        for key, value in sampler.items():
            if key not in _SAMPLER_FIELDS:
                raise TypeError("unknown sampler setting %r" % key)
            setattr(params, key, value)
        check(library().llm_session_set_sampler(self.handle, ctypes.byref(params)))

    def reset(self):
        check(library().llm_session_reset(self.handle))

    def set_seed(self, seed):
        check(library().llm_session_set_seed(self.handle, seed))

    def rewind(self, n_tokens):
        check(library().llm_session_rewind(self.handle, n_tokens))

    def cancel(self):
        """Latch a cancel (any thread): the running or next model call raises
        LlmError(ERR_CANCELLED) and leaves the session as it was."""
        check(library().llm_session_cancel(self.handle))

    def fork(self):
        """A new Session sharing this one's history and KV blocks."""
        handle = N.c_void_p()
        check(library().llm_session_fork(self.handle, ctypes.byref(handle)))
        return Session(self._model, _handle=handle.value)

    def save(self):
        lib = library()
        n = ctypes.c_size_t()
        status = lib.llm_session_save(self.handle, None, 0, ctypes.byref(n))
        if status != ERR_BUFFER_TOO_SMALL:
            check(status)
        buf = ctypes.create_string_buffer(n.value)
        check(lib.llm_session_save(self.handle, buf, n.value, ctypes.byref(n)))
        return buf.raw[:n.value]

    def load(self, data):
        data = bytes(data)
        check(library().llm_session_load(self.handle, data, len(data)))

    def stats(self):
        stats = init_struct(N.SessionStats, "llm_session_stats_init_v")
        check(library().llm_session_get_stats(self.handle, ctypes.byref(stats)))
        return as_dict(stats)

    # ---- non-blocking steps (game loops) ----
    def prefill_async(self, prompt):
        tokens = self._tokens(prompt)
        arr = (N.llm_token * len(tokens))(*tokens)
        check(library().llm_session_prefill_async(self.handle, arr, len(tokens)))

    def decode_async(self):
        check(library().llm_session_decode_async(self.handle))

    def poll(self):
        """Never blocks. (False, None) while the step runs; (True, token) once
        it ended (token None for a prefill); raises LlmError if it failed."""
        done = ctypes.c_int32()
        token = N.llm_token(-1)
        check(library().llm_session_poll(self.handle, ctypes.byref(done), ctypes.byref(token)))
        if not done.value:
            return False, None
        return True, (token.value if token.value >= 0 else None)

    def wait(self):
        token = N.llm_token(-1)
        check(library().llm_session_wait(self.handle, ctypes.byref(token)))
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
        params = init_struct(N.GenerateParams, "llm_generate_params_init_v")
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
        result = init_struct(N.GenerateResult, "llm_generate_result_init_v")
        status = lib.llm_generate(self.handle, arr, len(tokens), ctypes.byref(params),
                                  ctypes.byref(result))
        if failure:
            raise failure[0]
        check(status)
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
