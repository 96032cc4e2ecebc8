"""Status codes, exceptions and the version rule of the Python binding."""

from . import _native as N

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


_STATUS_NAMES = {
    OK: "LLM_OK", ERR_INVALID_ARGUMENT: "LLM_ERR_INVALID_ARGUMENT", ERR_IO: "LLM_ERR_IO",
    ERR_BAD_MODEL: "LLM_ERR_BAD_MODEL", ERR_UNSUPPORTED: "LLM_ERR_UNSUPPORTED",
    ERR_OUT_OF_MEMORY: "LLM_ERR_OUT_OF_MEMORY", ERR_CONTEXT_FULL: "LLM_ERR_CONTEXT_FULL",
    ERR_KV_FULL: "LLM_ERR_KV_FULL", ERR_CANCELLED: "LLM_ERR_CANCELLED",
    ERR_BUFFER_TOO_SMALL: "LLM_ERR_BUFFER_TOO_SMALL", ERR_BUSY: "LLM_ERR_BUSY",
    ERR_DEVICE: "LLM_ERR_DEVICE", ERR_INTERNAL: "LLM_ERR_INTERNAL",
}


class LlmError(Exception):
    """A libllm call failed: status (int), status_name ("LLM_ERR_IO"), message."""

    def __init__(self, status, message, status_name=None):
        self.status = status
        self.status_name = status_name or _STATUS_NAMES.get(status, "status %d" % status)
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


class LlmVersionError(RuntimeError):
    """The libllm found is not the version this binding was written for."""


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
