// Native handles as SafeHandles: released exactly once (Dispose or the
// finalizer), never while a P/Invoke call that received them is running.
using System;
using System.Runtime.InteropServices;

namespace LibLlm
{
    internal sealed class ModelHandle : SafeHandle
    {
        public ModelHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        protected override bool ReleaseHandle()
        {
            Native.llm_model_free(handle);
            return true;
        }
    }

    internal sealed class SessionHandle : SafeHandle
    {
        public SessionHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        protected override bool ReleaseHandle()
        {
            Native.llm_session_free(handle);
            return true;
        }
    }
}
