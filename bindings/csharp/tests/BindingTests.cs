// Tests of the C# binding against the real library and the default model
// ($LLM_MODEL_PATH; the tests that need it are skipped when it is unset).
using System;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;

namespace LibLlm.Tests
{
    public static class BindingTests
    {
        private const string PromptText = "The old lighthouse keeper looked at the sea and said";

        private static string ModelPath()
        {
            string path = Environment.GetEnvironmentVariable("LLM_MODEL_PATH");
            if (string.IsNullOrEmpty(path))
                throw new SkipException("LLM_MODEL_PATH is not set: no model to test with " +
                                        "(scripts/fetch_model.sh prints the default model's path)");
            return path;
        }

        private static SessionOptions Greedy() { return new SessionOptions { Temperature = 0f }; }

        // A raw declaration for passing a stale handle value straight to C.
        [DllImport("llm")] private static extern int llm_session_decode(IntPtr session, out int token);
        [DllImport("llm")] private static extern IntPtr llm_last_error();

        [Test]
        public static void VersionIsAcceptedAndOthersRefused()
        {
            string[] v = Llm.Version.Split('.');
            Assert.Equal(Llm.WrittenForMajor + "." + Llm.WrittenForMinor, v[0] + "." + v[1], "library version");
            Llm.EnsureCompatible();
            Llm.CheckVersion("0.3.9", 0, 3);
            foreach (string bad in new[] { "0.4.0", "0.2.1", "1.3.0", "garbage" })
            {
                var e = Assert.Throws<LlmVersionException>(() => Llm.CheckVersion(bad, 0, 3), "refuse " + bad);
                Assert.True(e.Message.Contains("0.3"), "the message names the expected version");
            }
            Llm.CheckVersion("1.5.0", 1, 3);
            Assert.Throws<LlmVersionException>(() => Llm.CheckVersion("2.0.0", 1, 3), "refuse 2.0.0");
        }

        [Test]
        public static void StructSizesMatchTheAbiTable()
        {
            // docs/ABI.md, "Historical sizes", column 0.3 (LP64).
            Assert.Equal(56, Marshal.SizeOf(typeof(ModelParams)), "llm_model_params");
            Assert.Equal(248, Marshal.SizeOf(typeof(ModelInfoNative)), "llm_model_info");
            Assert.Equal(168, Marshal.SizeOf(typeof(KvStats)), "llm_kv_stats");
            Assert.Equal(72, Marshal.SizeOf(typeof(BatchStats)), "llm_batch_stats");
            Assert.Equal(36, Marshal.SizeOf(typeof(SamplerParams)), "llm_sampler_params");
            Assert.Equal(8, Marshal.SizeOf(typeof(SamplerExt)), "llm_sampler_ext");
            Assert.Equal(72, Marshal.SizeOf(typeof(SessionParams)), "llm_session_params");
            Assert.Equal(32, Marshal.SizeOf(typeof(SessionStatsNative)), "llm_session_stats");
            Assert.Equal(40, Marshal.SizeOf(typeof(GenerateParams)), "llm_generate_params");
            Assert.Equal(32, Marshal.SizeOf(typeof(GenerateResultNative)), "llm_generate_result");
            Assert.Equal(16, Marshal.SizeOf(typeof(ChatMessageNative)), "llm_chat_message");
        }

        [Test]
        public static void MissingFileIsAnIoErrorWithAMessage()
        {
            var e = Assert.Fails(LlmStatus.Io, () => new Model("/nonexistent/model.gguf"), "load a missing file");
            Assert.Equal("LLM_ERR_IO", e.StatusName, "status name");
            Assert.True(e.NativeMessage.Contains("/nonexistent/model.gguf"), "the message names the path");
        }

        [Test]
        public static void ModelInfoAndTokenizer()
        {
            using (var model = new Model(ModelPath()))
            {
                ModelInfo info = model.Info;
                Assert.Equal("llama", info.Architecture, "architecture");
                Assert.True(info.Vocab > 1000, "n_vocab");
                Assert.True(info.MappedWeightBytes > 0 && info.WeightCopyBytes > 0, "load memory report");
                int[] tokens = model.Tokenize("Hello, world!");
                Assert.True(tokens.Length >= 3, "token count");
                Assert.Equal("Hello, world!", model.Detokenize(tokens), "round trip");
                Assert.True(model.IsEndOfGeneration(info.EosToken), "EOS ends a generation");
                string chat = model.ChatFormat(new[] { new KeyValuePair<string, string>("user", "Hi") });
                Assert.True(chat.Contains("Hi"), "chat template output");
            }
        }

        [Test]
        public static void GreedyTokensAreTheArgmaxOfTheLogits()
        {
            using (var model = new Model(ModelPath()))
            using (var s = model.CreateSession(Greedy()))
            {
                s.Prefill(PromptText);
                for (int i = 0; i < 8; i++)
                {
                    float[] logits = s.Logits();
                    int best = 0;
                    for (int j = 1; j < logits.Length; j++)
                        if (logits[j] > logits[best]) best = j;
                    Assert.Equal(best, s.Decode(), "greedy token " + i);
                }
            }
        }

        [Test]
        public static void StreamGenerateAndTryPollGiveTheSameGreedyText()
        {
            using (var model = new Model(ModelPath()))
            using (var a = model.CreateSession(Greedy()))
            using (var b = model.CreateSession(Greedy()))
            using (var c = model.CreateSession(Greedy()))
            {
                string streamed = string.Concat(a.Stream(PromptText, 24));
                var pieces = new List<string>();
                Generation g = b.Generate(PromptText, 24, null, pieces.Add);
                Assert.True(streamed.Length > 0, "some text");
                Assert.Equal(streamed, g.Text, "Stream vs Generate");
                Assert.Equal(g.Text, string.Concat(pieces), "Generate's pieces");
                var polled = new System.Text.StringBuilder();
                using (TokenStream ts = c.StartGeneration(model.Tokenize(PromptText), 24))
                {
                    while (!ts.IsFinished)
                    {
                        string text;
                        if (ts.TryPoll(out text)) polled.Append(text);
                        else Thread.Sleep(1);
                    }
                }
                Assert.Equal(streamed, polled.ToString(), "TryPoll vs Stream");
                Assert.Equal(a.TokenCount, c.TokenCount, "history length");
            }
        }

        private static List<int> FortyGreedyIds(Session s)
        {
            s.Prefill("Tell me about dragons.");
            var ids = new List<int>();
            for (int i = 0; i < 40; i++) ids.Add(s.Decode());
            return ids;
        }

        [Test]
        public static void TwoSessionsOnTwoThreadsAndACancelFromAThird()
        {
            // Deterministic kernels: B's tokens must not depend on A running beside it.
            using (var model = new Model(ModelPath(), new ModelOptions { Deterministic = true }))
            using (var a = model.CreateSession(Greedy()))
            using (var b = model.CreateSession(Greedy()))
            {
                List<int> expectedB;
                using (var solo = model.CreateSession(Greedy())) expectedB = FortyGreedyIds(solo);
                a.Prefill("Write a very long story about a cat.");
                int aTokensBefore = a.TokenCount;
                int aDecoded = 0;
                var start = new Barrier(2);
                var bDone = new ManualResetEventSlim(false);
                object aResult = null;
                List<int> bResult = null;
                Exception bFailure = null;
                var ta = new Thread(() =>
                {
                    // A loop of blocking decodes (an end-of-generation token
                    // does not stop it): the cancel lands on one of them.
                    start.SignalAndWait();
                    try
                    {
                        for (int i = 0; i < 400; i++)
                        {
                            a.Decode();
                            aDecoded++;
                        }
                        aResult = "finished";
                    }
                    catch (Exception e) { aResult = e; }
                });
                var tb = new Thread(() =>
                {
                    start.SignalAndWait();
                    try { bResult = FortyGreedyIds(b); }
                    catch (Exception e) { bFailure = e; }
                    finally { bDone.Set(); }
                });
                // Once B is done, so that A and B surely shared passes.
                var tc = new Thread(() =>
                {
                    bDone.Wait(120000);
                    a.Cancel();
                });
                ta.Start(); tb.Start(); tc.Start();
                Assert.True(ta.Join(120000) && tb.Join(120000) && tc.Join(120000), "threads finish");
                var ex = aResult as LlmException;
                Assert.True(ex != null, "A was cancelled, got: " + aResult);
                Assert.Equal(LlmStatus.Cancelled, ex.Status, "A's status");
                Assert.Equal(aTokensBefore + aDecoded, a.TokenCount, "the cancelled decode changed nothing");
                Assert.True(a.Decode() >= 0, "A stays usable");
                Assert.True(bFailure == null, "B failed: " + bFailure);
                Assert.Equal(string.Join(" ", expectedB), string.Join(" ", bResult), "B's tokens");
                Assert.True(model.BatchStats.max_sessions_in_pass >= 2, "A and B shared forward passes");
            }
        }

        [Test]
        public static void UseAfterDisposeIsACleanError()
        {
            var model = new Model(ModelPath());
            var session = model.CreateSession(Greedy());
            IntPtr stale = session.Handle.DangerousGetHandle();
            session.Dispose();
            session.Dispose();  // twice: a no-op
            Assert.True(session.IsDisposed, "IsDisposed");
            var e = Assert.Fails(LlmStatus.InvalidArgument, () => session.Decode(), "decode after dispose");
            Assert.True(e.Message.Contains("disposed"), "message");
            Assert.Fails(LlmStatus.InvalidArgument, () => session.Cancel(), "cancel after dispose");
            // The library's own check: a freed handle passed straight to C is refused.
            int token;
            Assert.Equal(1, llm_session_decode(stale, out token), "stale handle status");
            Assert.True(Utf8.Copy(llm_last_error()).Contains("session"), "stale handle message");
            // A session outlives the Model object that created it.
            using (var s2 = model.CreateSession(Greedy()))
            {
                model.Dispose();
                Assert.Fails(LlmStatus.InvalidArgument, () => model.Tokenize("x"), "tokenize after dispose");
                s2.Prefill(new[] { 1, 2, 3 });
                Assert.True(s2.Decode() >= 0, "session of a disposed model still decodes");
            }
        }

        [Test]
        public static void BadInputsThrowWithStatusAndMessage()
        {
            using (var model = new Model(ModelPath()))
            using (var s = model.CreateSession())
            {
                Assert.Fails(LlmStatus.InvalidArgument, () => s.Decode(), "decode before prefill");
                Assert.Fails(LlmStatus.InvalidArgument, () => s.Prefill(new[] { model.Info.Vocab + 5 }), "bad token");
                Assert.Fails(LlmStatus.InvalidArgument, () => s.Generate("hi", 0), "max_tokens 0");
                var e = Assert.Throws<LlmException>(() => s.Load(new byte[] { 1, 2, 3 }), "load garbage");
                Assert.True(e.Status == LlmStatus.InvalidArgument || e.Status == LlmStatus.Unsupported, "load status");
                int token;
                Assert.Fails(LlmStatus.InvalidArgument, () => s.Poll(out token), "poll with nothing submitted");
                s.PrefillAsync(model.Tokenize("Hello"));
                Assert.Fails(LlmStatus.Busy, () => s.Decode(), "decode while an async step is pending");
                Assert.Equal(-1, s.Wait(), "a prefill step has no token");
                Assert.True(s.Decode() >= 0, "usable afterwards");
                Assert.Throws<ArgumentNullException>(() => model.Tokenize(null), "null text");
            }
        }

        [Test]
        public static void ExceptionInACallbackStopsAndPropagates()
        {
            using (var model = new Model(ModelPath()))
            using (var s = model.CreateSession(Greedy()))
            {
                var e = Assert.Throws<InvalidOperationException>(
                    () => s.Generate(PromptText, 50, null, p => { throw new InvalidOperationException("boom"); }),
                    "callback exception");
                Assert.Equal("boom", e.Message, "the callback's exception");
                Generation g = s.Generate(new int[0], 50, null, null, p => true);
                Assert.Equal(StopReason.Callback, g.StopReason, "stopWhen stops");
            }
        }

        [Test]
        public static void ForksShareKvAndCancelStopsATokenStream()
        {
            using (var model = new Model(ModelPath()))
            using (var baseSession = model.CreateSession(Greedy()))
            {
                baseSession.Prefill(string.Concat(Enumerable.Repeat("You are in a village. ", 20)));
                var forks = Enumerable.Range(0, 3).Select(i => baseSession.Fork()).ToList();
                Assert.True(model.KvStats.blocks_shared > 0, "forks share blocks");
                Assert.Equal(1u, model.KvStats.n_pools, "no sliding window: one pool");
                int n = baseSession.TokenCount;
                var ts = forks[0].StartGeneration(null, 100);
                forks[0].Cancel();
                Assert.Fails(LlmStatus.Cancelled, () =>
                {
                    string text;
                    while (!ts.IsFinished) ts.TryPoll(out text);
                }, "cancelled stream");
                Assert.True(ts.IsFinished, "finished after the failure");
                Assert.Equal(n, forks[0].TokenCount, "the cancelled step changed nothing");
                foreach (var f in forks) f.Dispose();
            }
        }

        [Test]
        public static void SaveAndLoadRoundTrip()
        {
            using (var model = new Model(ModelPath()))
            using (var a = model.CreateSession(Greedy()))
            using (var b = model.CreateSession(Greedy()))
            {
                a.Prefill(PromptText);
                b.Load(a.Save());
                Assert.Equal(a.TokenCount, b.TokenCount, "history length");
                for (int i = 0; i < 4; i++) Assert.Equal(a.Decode(), b.Decode(), "token " + i);
            }
        }

        [Test]
        public static void LogCallbackReceivesTheLoadMessage()
        {
            string path = ModelPath();
            var messages = new List<string>();
            Llm.SetLogCallback((level, text) => { lock (messages) messages.Add(level + " " + text); }, 1);
            try
            {
                new Model(path).Dispose();
            }
            finally
            {
                Llm.SetLogCallback(null, 1);
            }
            int count;
            lock (messages) count = messages.Count;
            Assert.True(messages.Any(m => m.StartsWith("1 ") && m.Contains("loaded")), "an INFO message about the load");
            new Model(path).Dispose();
            lock (messages) Assert.Equal(count, messages.Count, "no message after the sink was removed");
        }

        [Test]
        public static void StopStringsReachTheLibrary()
        {
            using (var model = new Model(ModelPath()))
            {
                string full;
                using (var s = model.CreateSession(Greedy())) full = s.Generate(PromptText, 24).Text;
                string[] words = full.Split(new[] { ' ' }, StringSplitOptions.RemoveEmptyEntries);
                Assert.True(words.Length >= 4, "some words: " + full);
                string stop = words[words.Length / 2];
                using (var s = model.CreateSession(Greedy()))
                {
                    Generation g = s.Generate(PromptText, 24, new[] { "never appears 1234", stop });
                    Assert.Equal(StopReason.StopString, g.StopReason, "stop reason");
                    Assert.Equal(full.Substring(0, full.IndexOf(stop, StringComparison.Ordinal)), g.Text, "text up to the stop string");
                }
            }
        }
    }
}
