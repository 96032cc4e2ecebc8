// A small test runner (no NUnit needed, runs offline with Debian's Mono):
// runs every static method of the test classes marked [Test], in declaration
// order, prints one line per test and a summary, and exits 1 if any failed.
//   mono LibLlm.Tests.exe [name-substring]
using System;
using System.Diagnostics;
using System.Linq;
using System.Reflection;

namespace LibLlm.Tests
{
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class TestAttribute : Attribute { }

    public sealed class SkipException : Exception
    {
        public SkipException(string reason) : base(reason) { }
    }

    public static class Assert
    {
        public static void True(bool condition, string what)
        {
            if (!condition) throw new Exception("assertion failed: " + what);
        }

        public static void Equal<T>(T expected, T actual, string what)
        {
            if (!Equals(expected, actual))
                throw new Exception("assertion failed: " + what + ": expected <" + expected + "> got <" + actual + ">");
        }

        public static T Throws<T>(Action action, string what) where T : Exception
        {
            try
            {
                action();
            }
            catch (T e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new Exception("assertion failed: " + what + ": expected " + typeof(T).Name + ", got " + e);
            }
            throw new Exception("assertion failed: " + what + ": expected " + typeof(T).Name + ", nothing thrown");
        }

        public static LlmException Fails(LlmStatus status, Action action, string what)
        {
            var e = Throws<LlmException>(action, what);
            Equal(status, e.Status, what + " (status; message: " + e.Message + ")");
            True(e.NativeMessage.Length > 0 && e.StatusName.StartsWith("LLM_ERR_"), what + ": status name and message");
            return e;
        }
    }

    public static class TestRunner
    {
        public static int Main(string[] args)
        {
            string filter = args.Length > 0 ? args[0] : "";
            var tests = typeof(TestRunner).Assembly.GetTypes()
                .SelectMany(t => t.GetMethods(BindingFlags.Public | BindingFlags.Static))
                .Where(m => m.GetCustomAttributes(typeof(TestAttribute), false).Length > 0)
                .OrderBy(m => m.MetadataToken)
                .Where(m => (m.DeclaringType.Name + "." + m.Name).Contains(filter))
                .ToList();
            int passed = 0, failed = 0, skipped = 0;
            foreach (var test in tests)
            {
                string name = test.DeclaringType.Name + "." + test.Name;
                var watch = Stopwatch.StartNew();
                try
                {
                    test.Invoke(null, null);
                    passed++;
                    Console.WriteLine("PASS {0} ({1} ms)", name, watch.ElapsedMilliseconds);
                }
                catch (TargetInvocationException e) when (e.InnerException is SkipException)
                {
                    skipped++;
                    Console.WriteLine("SKIP {0}: {1}", name, e.InnerException.Message);
                }
                catch (TargetInvocationException e)
                {
                    failed++;
                    Console.WriteLine("FAIL {0}: {1}", name, e.InnerException);
                }
            }
            Console.WriteLine("csharp: {0} passed, {1} failed, {2} skipped", passed, failed, skipped);
            return failed == 0 ? 0 : 1;
        }
    }
}
