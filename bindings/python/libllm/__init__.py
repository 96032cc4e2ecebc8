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

from ._errors import (ERR_BAD_MODEL, ERR_BUFFER_TOO_SMALL, ERR_BUSY,
                      ERR_CANCELLED, ERR_CONTEXT_FULL, ERR_DEVICE, ERR_INTERNAL,
                      ERR_INVALID_ARGUMENT, ERR_IO, ERR_KV_FULL, ERR_OUT_OF_MEMORY,
                      ERR_UNSUPPORTED, KV_F16, KV_F32, LOG_DEBUG, LOG_ERROR, LOG_INFO,
                      LOG_WARN, OK, STOP_CALLBACK, STOP_CONTEXT_FULL, STOP_EOG,
                      STOP_MAX_TOKENS, STOP_STRING, LlmError, LlmVersionError,
                      check_version)
from ._library import library, set_log_callback, version
from .model import Model
from .session import Generation, Session

__all__ = [
    "LlmError", "LlmVersionError", "Model", "Session", "Generation", "version",
    "set_log_callback", "library", "check_version",
    "OK", "ERR_INVALID_ARGUMENT", "ERR_IO", "ERR_BAD_MODEL", "ERR_UNSUPPORTED",
    "ERR_OUT_OF_MEMORY", "ERR_CONTEXT_FULL", "ERR_KV_FULL", "ERR_CANCELLED",
    "ERR_BUFFER_TOO_SMALL", "ERR_BUSY", "ERR_DEVICE", "ERR_INTERNAL",
    "STOP_EOG", "STOP_MAX_TOKENS", "STOP_STRING", "STOP_CALLBACK", "STOP_CONTEXT_FULL",
    "KV_F16", "KV_F32", "LOG_DEBUG", "LOG_INFO", "LOG_WARN", "LOG_ERROR",
]
