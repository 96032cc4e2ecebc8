// The village of NPCs in C# (the C version: npc.c). Every NPC forks one
// shared world prompt (its KV blocks are stored once); all of them answer
// the player at the same time through the model's batcher while a frame loop
// calls TokenStream.TryPoll, which never blocks.
//   mono Npc.exe [MODEL.gguf]      (default: $LLM_MODEL_PATH)
// Exit status 1 when an NPC says nothing, no KV block is shared, or the
// median TryPoll takes over 1 ms.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using LibLlm;

public static class Npc
{
    private const int MaxReplyTokens = 40;
    private const double FrameMs = 4.0;  // a 250 Hz frame loop

    private const string World =
        "You are a character in Emberfall, a small mountain village. Emberfall sits in a valley " +
        "below the Ashen Peaks, where the old volcano sleeps. Two hundred people live there. " +
        "The village has a stone well in the square, a smithy run by the Brannoc family, a bakery " +
        "that opens before dawn, a chapel with a cracked bell, and an inn called The Sleeping " +
        "Dragon. A river, the Silverrun, flows past the mill on the east side. Last week the " +
        "great lantern of the chapel, which has burned for a hundred years, went out and was " +
        "stolen. Strange lights have been seen on the slopes of the volcano at night. Wolves have " +
        "come down from the forest. Travellers are rare, and the villagers are wary of them but " +
        "polite. Winter is coming and the harvest was poor. Answer in character, in one or two " +
        "short sentences, and never mention that you are an AI.";

    private static readonly string[,] Npcs =
    {
        { "Mira", "You are Mira, the baker: cheerful, talkative, and you know every rumour." },
        { "Old Tomas", "You are Old Tomas, the chapel keeper: grave, slow, and suspicious." },
        { "Brannoc", "You are Brannoc, the blacksmith: gruff, strong, and practical." },
        { "Lysa", "You are Lysa, the innkeeper's daughter: curious and a little reckless." },
        { "Captain Dorr", "You are Captain Dorr of the village watch: stern and careful." },
    };

    private const string Question =
        "Good morning. I am a traveller. Who stole the chapel lantern, and where should I look for it?";

    private static double Median(List<double> v)
    {
        v.Sort();
        return v.Count == 0 ? 0 : v[v.Count / 2];
    }

    public static int Main(string[] args)
    {
        string path = args.Length > 0 ? args[0] : Environment.GetEnvironmentVariable("LLM_MODEL_PATH");
        if (string.IsNullOrEmpty(path))
        {
            Console.Error.WriteLine("usage: Npc.exe MODEL.gguf (or set LLM_MODEL_PATH)");
            return 2;
        }
        int n = Npcs.GetLength(0);
        using (var model = new Model(path))
        {
            // Every NPC's full prompt; the world part is their common token prefix.
            var prompts = new int[n][];
            for (int i = 0; i < n; i++)
            {
                string text = model.ChatFormat(new[]
                {
                    new KeyValuePair<string, string>("system", World + " " + Npcs[i, 1]),
                    new KeyValuePair<string, string>("user", Question),
                });
                prompts[i] = model.Tokenize(text, addSpecial: true, parseSpecial: true);
            }
            int common = prompts[0].Length;
            for (int i = 1; i < n; i++)
            {
                int k = 0;
                while (k < common && k < prompts[i].Length && prompts[i][k] == prompts[0][k]) k++;
                common = k;
            }

            var sessions = new Session[n];
            var watch = Stopwatch.StartNew();
            using (var world = model.CreateSession(new SessionOptions { Temperature = 0.7f }))
            {
                world.Prefill(prompts[0].Take(common).ToArray());
                for (int i = 0; i < n; i++)
                {
                    sessions[i] = world.Fork();
                    sessions[i].SetSeed(1000 + (ulong)i);
                }
            }  // the forks keep the world's blocks
            Console.WriteLine("Emberfall: {0} NPCs forked from one {1}-token world prompt (prefilled once in {2:F0} ms)",
                              n, common, watch.Elapsed.TotalMilliseconds);
            Console.WriteLine("Player: {0}\n", Question);

            var streams = new TokenStream[n];
            var replies = new System.Text.StringBuilder[n];
            for (int i = 0; i < n; i++)
            {
                streams[i] = sessions[i].StartGeneration(prompts[i].Skip(common).ToArray(), MaxReplyTokens);
                replies[i] = new System.Text.StringBuilder();
            }

            var pollUs = new List<double>();     // every TryPoll
            var waitingUs = new List<double>();  // TryPoll while the step still ran (a poll only)
            var frameUs = new List<double>();
            long frames = 0;
            double tick = Stopwatch.Frequency / 1e6;
            watch.Restart();
            while (streams.Any(s => !s.IsFinished))
            {
                long frameStart = Stopwatch.GetTimestamp();
                for (int i = 0; i < n; i++)
                {
                    if (streams[i].IsFinished) continue;
                    int before = streams[i].TokenCount;
                    long p0 = Stopwatch.GetTimestamp();
                    string text;
                    bool got = streams[i].TryPoll(out text);
                    double us = (Stopwatch.GetTimestamp() - p0) / tick;
                    pollUs.Add(us);
                    if (!got && !streams[i].IsFinished && streams[i].TokenCount == before) waitingUs.Add(us);
                    if (got) replies[i].Append(text);
                }
                frameUs.Add((Stopwatch.GetTimestamp() - frameStart) / tick);
                frames++;
                double left = FrameMs - (Stopwatch.GetTimestamp() - frameStart) / tick / 1000.0;
                if (left > 0) Thread.Sleep(TimeSpan.FromMilliseconds(left));
            }
            double seconds = watch.Elapsed.TotalSeconds;
            // KV use with every prompt and reply in place, before any NPC is freed.
            KvStats kv = model.KvStats;
            int[] tokens = sessions.Select(s => s.TokenCount).ToArray();

            int silent = 0;
            for (int i = 0; i < n; i++)
            {
                string reply = replies[i].ToString().Trim().Replace('\n', ' ');
                Console.WriteLine("{0,-13} {1}", Npcs[i, 0], reply);
                if (reply.Length == 0) silent++;
            }
            BatchStats bs = model.BatchStats;
            double pollMax = pollUs.Max(), frameMax = frameUs.Max();
            double pollMed = Median(pollUs), frameMed = Median(frameUs);
            Console.WriteLine("\n{0} tokens in {1:F2} s over {2} frames of {3:F0} ms",
                              streams.Sum(s => s.TokenCount), seconds, frames, FrameMs);
            Console.WriteLine("TokenStream.TryPoll: {0} calls, median {1:F1} us, max {2:F1} us " +
                              "(poll, and on a new token its text and the next decode_async)",
                              pollUs.Count, pollMed, pollMax);
            Console.WriteLine("  of which {0} found the step still running: median {1:F1} us, max {2:F1} us",
                              waitingUs.Count, Median(waitingUs), waitingUs.Count > 0 ? waitingUs.Max() : 0);
            Console.WriteLine("frame work (all NPCs): median {0:F1} us, max {1:F1} us", frameMed, frameMax);
            Console.WriteLine("batcher: {0:F2} sessions per decode pass on average, at most {1} in one pass",
                              bs.decode_iterations > 0 ? (double)bs.decode_rows / bs.decode_iterations : 0,
                              bs.max_sessions_in_pass);
            // Without sharing every session would hold its own blocks.
            ulong unshared = 0;
            foreach (int t in tokens) unshared += ((ulong)t + kv.block_tokens - 1) / kv.block_tokens;
            ulong saved = unshared > kv.blocks_used ? unshared - kv.blocks_used : 0;
            Console.WriteLine("KV cache ({0} tokens in {1} sessions): {2} blocks of {3} KiB in use, {4} of them " +
                              "shared;\n  without sharing: {5} blocks. Sharing saved {6} blocks = {7:F1} MiB ({8:F0}%)",
                              tokens.Sum(), n, kv.blocks_used, kv.block_bytes / 1024, kv.blocks_shared,
                              unshared, saved, saved * kv.block_bytes / (1024.0 * 1024.0), 100.0 * saved / unshared);
            foreach (var s in streams) s.Dispose();
            foreach (var s in sessions) s.Dispose();
            if (silent > 0) { Console.Error.WriteLine("Npc: {0} NPC(s) said nothing", silent); return 1; }
            if (kv.blocks_shared == 0)
            {
                Console.Error.WriteLine("Npc: the world prompt's KV blocks were not shared");
                return 1;
            }
            if (pollMed > 1000)
            {
                Console.Error.WriteLine("Npc: the median TryPoll took {0:F1} us (> 1 ms)", pollMed);
                return 1;
            }
        }
        return 0;
    }
}
