// Marks the static methods that native code calls through a function
// pointer. Unity's IL2CPP and Mono AOT look for an attribute of exactly this
// name (any namespace) to generate a reverse P/Invoke wrapper ahead of time;
// a JIT runtime ignores it. Defined here so that the binding needs no Unity
// assembly.
using System;

namespace AOT
{
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class MonoPInvokeCallbackAttribute : Attribute
    {
        public MonoPInvokeCallbackAttribute(Type delegateType) { DelegateType = delegateType; }

        public Type DelegateType { get; private set; }
    }
}
