// Command greedy is the cross-language agreement convention: load
// $LLM_MODEL_PATH, tokenize os.Args[1] (addSpecial, not parseSpecial),
// decode 16 tokens greedily (temperature 0; end-of-generation tokens do not
// stop it) and print the generated token ids space-separated on one line.
//
//	go run ./examples/greedy "The capital of France is"
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"libllm/llm"
)

func run(path, prompt string) ([]llm.Token, error) {
	model, err := llm.LoadModel(path, nil)
	if err != nil {
		return nil, err
	}
	defer model.Close()
	tokens, err := model.Tokenize(prompt, true, false)
	if err != nil {
		return nil, err
	}
	greedy := llm.GreedySampler()
	session, err := model.NewSession(&llm.SessionParams{Sampler: &greedy})
	if err != nil {
		return nil, err
	}
	defer session.Close()
	ctx := context.Background()
	if err := session.Prefill(ctx, tokens); err != nil {
		return nil, err
	}
	out := make([]llm.Token, 0, 16)
	for i := 0; i < 16; i++ {
		t, err := session.Decode(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func main() {
	path := os.Getenv("LLM_MODEL_PATH")
	if path == "" || len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: LLM_MODEL_PATH=model.gguf greedy PROMPT")
		os.Exit(2)
	}
	ids, err := run(path, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "greedy:", err)
		os.Exit(1)
	}
	words := make([]string, len(ids))
	for i, t := range ids {
		words[i] = fmt.Sprint(t)
	}
	fmt.Println(strings.Join(words, " "))
}
