using System;
using System.Runtime.InteropServices;

namespace LibLlm
{
    /// <summary>Library-wide calls: version check, errors, logging.</summary>
    public static class Llm
    {
        /// <summary>The llm.h version this binding was written against. 0.x
        /// releases may change the ABI between minors (docs/ABI.md), so a 0.x
        /// library must have the same major and minor; from 1.0 on, the same
        /// major and at least this minor.</summary>
        public const int WrittenForMajor = 0;
        public const int WrittenForMinor = 3;

        private static readonly object s_lock = new object();
        private static bool s_checked;

        /// <summary>The library's version string, e.g. "0.3.0".</summary>
        public static string Version { get { return Utf8.Copy(Native.llm_version()); } }

        /// <summary>Throws LlmVersionException unless a library of this version
        /// keeps the ABI of the given header version.</summary>
        public static void CheckVersion(string version, int major, int minor)
        {
            string[] parts = (version ?? "").Split('.');
            int libMajor, libMinor;
            if (parts.Length < 2 || !int.TryParse(parts[0], out libMajor) ||
                !int.TryParse(parts[1], out libMinor))
                throw new LlmVersionException("libllm reports an unreadable version '" + version +
                                               "' (this binding was written for libllm " + major + "." + minor + ")");
            bool ok = libMajor == major && (major == 0 ? libMinor == minor : libMinor >= minor);
            if (!ok)
                throw new LlmVersionException(
                    "libllm " + version + " is not compatible with this C# binding, written for libllm " +
                    major + "." + minor + " (needs " +
                    (major == 0 ? "the same major and minor" : "the same major version") +
                    "); use the binding of that library version or put a libllm " + major + "." +
                    minor + " on the library path");
        }

        /// <summary>Checks the loaded library's version once (every Model
        /// constructor calls it).</summary>
        public static void EnsureCompatible()
        {
            if (s_checked) return;
            lock (s_lock)
            {
                if (s_checked) return;
                string v;
                try { v = Version; }
                catch (DllNotFoundException e)
                {
                    throw new DllNotFoundException(
                        "libllm.so not found: add its directory to LD_LIBRARY_PATH (" + e.Message + ")", e);
                }
                CheckVersion(v, WrittenForMajor, WrittenForMinor);
                s_checked = true;
            }
        }

        /// <summary>Throws LlmException for a failed status. Must run right
        /// after the native call on the same thread: llm_last_error() is
        /// thread-local and valid only until the next libllm call there, so it
        /// is read as a pointer and copied before anything else. (A SafeHandle
        /// released at the end of the call may call llm_*_free on this thread
        /// first; those never change the thread's last error.)</summary>
        internal static void Check(int status)
        {
            if (status == 0) return;
            throw Error(status);
        }

        internal static LlmException Error(int status)
        {
            string message = Utf8.Copy(Native.llm_last_error());
            string name = Utf8.Copy(Native.llm_status_string(status));
            return new LlmException((LlmStatus)status, name, message);
        }

        internal static LlmException Closed(string what)
        {
            return new LlmException(LlmStatus.InvalidArgument, "LLM_ERR_INVALID_ARGUMENT",
                                    what + " is disposed");
        }

        // ---- logging ----
        // The delegate is a static field (reachable from managed code for the
        // whole process, never collected) bound to a static method marked for
        // AOT; the user's sink travels as a GCHandle in the user pointer.
        private static readonly LogFn s_logTrampoline = LogTrampoline;
        // Every sink ever installed, never freed: a message being delivered on
        // another thread may still hold an old sink's pointer.
        private static readonly System.Collections.Generic.List<GCHandle> s_logSinks =
            new System.Collections.Generic.List<GCHandle>();

        [AOT.MonoPInvokeCallback(typeof(LogFn))]
        private static void LogTrampoline(int level, IntPtr message, IntPtr user)
        {
            try
            {
                var sink = (Action<int, string>)GCHandle.FromIntPtr(user).Target;
                sink(level, Utf8.Copy(message));
            }
            catch (Exception)
            {
                // Nothing may cross into native code.
            }
        }

        /// <summary>Installs a process-wide log sink (null: discard). It may
        /// be called on any libllm thread, so it must be thread-safe.</summary>
        public static void SetLogCallback(Action<int, string> sink, int minLevel)
        {
            EnsureCompatible();
            lock (s_lock)
            {
                if (sink == null)
                {
                    Check(Native.llm_set_log_callback(IntPtr.Zero, IntPtr.Zero, minLevel));
                }
                else
                {
                    GCHandle h = GCHandle.Alloc(sink);
                    int status = Native.llm_set_log_callback(
                        Marshal.GetFunctionPointerForDelegate(s_logTrampoline), GCHandle.ToIntPtr(h), minLevel);
                    if (status != 0) { var e = Error(status); h.Free(); throw e; }
                    s_logSinks.Add(h);
                }
            }
        }
    }
}
