// Cross-language agreement program (tests/bindings/same_tokens.sh):
//   mono Greedy.exe "<prompt>"
// loads $LLM_MODEL_PATH, tokenizes the prompt (add_special = 1,
// parse_special = 0), decodes 16 tokens greedily and prints their ids
// space-separated on one line.
using System;
using System.Linq;
using LibLlm;

public static class Greedy
{
    public static int Main(string[] args)
    {
        if (args.Length != 1)
        {
            Console.Error.WriteLine("usage: Greedy.exe PROMPT (model: $LLM_MODEL_PATH)");
            return 2;
        }
        using (var model = new Model(Environment.GetEnvironmentVariable("LLM_MODEL_PATH")))
        using (var session = model.CreateSession(new SessionOptions { Temperature = 0f }))
        {
            session.Prefill(model.Tokenize(args[0], addSpecial: true, parseSpecial: false));
            Console.WriteLine(string.Join(" ", Enumerable.Range(0, 16).Select(i => session.Decode())));
        }
        return 0;
    }
}
