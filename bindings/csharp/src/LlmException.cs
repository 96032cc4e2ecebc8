using System;

namespace LibLlm
{
    /// <summary>Status codes of llm.h (values are never renumbered).</summary>
    public enum LlmStatus
    {
        Ok = 0,
        InvalidArgument = 1,
        Io = 2,
        BadModel = 3,
        Unsupported = 4,
        OutOfMemory = 5,
        ContextFull = 6,
        KvFull = 7,
        Cancelled = 8,
        BufferTooSmall = 9,
        Busy = 10,
        Device = 11,
        Internal = 12,
    }

    /// <summary>A libllm call failed: its status and the library's message
    /// (llm_last_error, copied on the thread of the call right after it).</summary>
    public class LlmException : Exception
    {
        public LlmException(LlmStatus status, string statusName, string message)
            : base(statusName + ": " + message)
        {
            Status = status;
            StatusName = statusName;
            NativeMessage = message;
        }

        public LlmStatus Status { get; private set; }

        /// <summary>The library's name of the status, e.g. "LLM_ERR_IO".</summary>
        public string StatusName { get; private set; }

        /// <summary>The message without the status name.</summary>
        public string NativeMessage { get; private set; }
    }

    /// <summary>The libllm found is not the version this binding was written for.</summary>
    public class LlmVersionException : Exception
    {
        public LlmVersionException(string message) : base(message) { }
    }
}
