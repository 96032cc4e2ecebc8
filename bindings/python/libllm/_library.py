"""Loading libllm once, checking its version, and turning statuses into
exceptions; the process-wide log sink."""

import ctypes
import threading

from . import _native as N
from ._errors import ERR_INVALID_ARGUMENT, LOG_WARN, OK, LlmError, check_version

_lib_lock = threading.Lock()
_lib_obj = None


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


def check(status):
    """Raise LlmError for a failed call. Must run right after the call, on its
    thread: llm_last_error() is thread-local and valid until the next call."""
    if status != OK:
        lib = _lib_obj
        ptr = lib.llm_last_error()
        message = ctypes.string_at(ptr).decode("utf-8", "replace") if ptr else ""
        raise LlmError(status, message, lib.llm_status_string(status).decode())


def closed(what):
    return LlmError(ERR_INVALID_ARGUMENT, "%s is closed" % what)


def init_struct(struct_type, init_name):
    s = struct_type()
    check(getattr(library(), init_name)(ctypes.byref(s), ctypes.sizeof(struct_type)))
    return s


def as_dict(struct):
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
    check(lib.llm_set_log_callback(cb, None, min_level))
    _log_keepalive = cb  # the library holds the pointer: keep the thunk alive
