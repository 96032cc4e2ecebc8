package llm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// modelPath is the default model, or skips the test when LLM_MODEL_PATH is
// unset.
func modelPath(t *testing.T) string {
	p := os.Getenv("LLM_MODEL_PATH")
	if p == "" {
		t.Skip("LLM_MODEL_PATH is not set (export it to a GGUF model, e.g. the default " +
			"SmolLM2-135M-Instruct.Q4_1.gguf from scripts/fetch_model.sh)")
	}
	return p
}

func loadModel(t *testing.T, deterministic bool) *Model {
	m, err := LoadModel(modelPath(t), &ModelParams{NThreads: 2, Deterministic: deterministic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func greedySession(t *testing.T, m *Model, nCtx int) *Session {
	g := GreedySampler()
	s, err := m.NewSession(&SessionParams{NCtx: nCtx, Sampler: &g})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// golden is the first prompt of tests/data/golden/smollm2.teacher.json
// (tools/gen_teacher_goldens.py, llama-cpp-python): text, ids, and
// llama.cpp's greedy continuation.
type golden struct {
	Text         string  `json:"text"`
	IDs          []Token `json:"ids"`
	Continuation []Token `json:"continuation"`
}

func loadGolden(t *testing.T) golden {
	data, err := os.ReadFile("../../tests/data/golden/smollm2.teacher.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Prompts []golden }
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	return file.Prompts[0]
}

func wantStatus(t *testing.T, err error, want *Error, what string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want.Status)
	}
	if e.Message == "" {
		t.Fatalf("%s: %v has no message", what, err)
	}
}

func TestVersionCheck(t *testing.T) {
	if err := CheckVersion(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(Version(), "0.3.") {
		t.Fatalf("library %s", Version())
	}
	for _, v := range []string{"0.4.0", "1.3.0", "garbage", ""} {
		err := checkVersionString(v)
		wantStatus(t, err, ErrUnsupported, v)
		if !strings.Contains(err.Error(), "not supported") {
			t.Fatal(err)
		}
	}
	if err := checkVersionString("0.3.9"); err != nil {
		t.Fatal(err)
	}
}

func TestTokenizeLikeLlamaCpp(t *testing.T) {
	m := loadModel(t, false)
	g := loadGolden(t)
	info, err := m.Info()
	if err != nil || info.Architecture != "llama" || info.NVocab != 49152 ||
		info.MappedWeightBytes == 0 || info.WeightCopyBytes == 0 {
		t.Fatalf("%+v %v", info, err)
	}
	ids, err := m.Tokenize(g.Text, true, false)
	if err != nil || !equal(ids, g.IDs) {
		t.Fatalf("tokenize: %v %v, golden %v", ids, err, g.IDs)
	}
	text, err := m.Detokenize(ids, false)
	if err != nil || text != g.Text {
		t.Fatalf("detokenize: %q %v", text, err)
	}
}

func equal(a, b []Token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func greedyTokens(t *testing.T, m *Model, prompt []Token, n int) []Token {
	s := greedySession(t, m, 0)
	ctx := context.Background()
	if err := s.Prefill(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	out := make([]Token, n)
	for i := range out {
		tok, err := s.Decode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = tok
	}
	return out
}

func TestGreedyGenerationAgreesAcrossPathsAndWithLlamaCpp(t *testing.T) {
	m := loadModel(t, false)
	g := loadGolden(t)
	const n = 12
	byDecode := greedyTokens(t, m, g.IDs, n)
	// llama.cpp's greedy continuation: clear argmax margins at the start.
	if !equal(byDecode[:4], g.Continuation[:4]) {
		t.Fatalf("greedy %v, llama.cpp %v", byDecode, g.Continuation)
	}
	want, _ := m.Detokenize(byDecode, false)

	// Callback streaming.
	s := greedySession(t, m, 0)
	var text strings.Builder
	res, err := s.Generate(context.Background(), g.IDs, GenerateOptions{MaxTokens: n}, func(p string) bool {
		text.WriteString(p)
		return true
	})
	if err != nil || res.NPromptTokens != len(g.IDs) {
		t.Fatal(res, err)
	}
	if res.StopReason == StopMaxTokens && text.String() != want {
		t.Fatalf("generate %q, decode %q", text.String(), want)
	}

	// Channel streaming.
	s2 := greedySession(t, m, 0)
	pieces, wait := s2.Stream(context.Background(), g.IDs, GenerateOptions{MaxTokens: n})
	var streamed strings.Builder
	for p := range pieces {
		streamed.WriteString(p)
	}
	if _, err := wait(); err != nil || streamed.String() != text.String() {
		t.Fatalf("stream %q %v", streamed.String(), err)
	}

	// Polling with the async steps.
	s3 := greedySession(t, m, 0)
	if err := s3.SubmitPrefill(g.IDs); err != nil {
		t.Fatal(err)
	}
	var polled []Token
	pending := 0
	for len(polled) < n {
		tok, done, err := s3.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if !done {
			pending++
			runtime.Gosched()
			continue
		}
		if tok >= 0 {
			polled = append(polled, tok)
		}
		if len(polled) < n {
			if err := s3.SubmitDecode(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !equal(polled, byDecode) || pending == 0 {
		t.Fatalf("polled %v (pending %d), decode %v", polled, pending, byDecode)
	}
}

// Two sessions driven from two OS threads while a third cancels the first.
func TestTwoSessionsTwoThreadsCancelFromThird(t *testing.T) {
	m := loadModel(t, true) // batch-invariant: B must equal a solo run
	g := loadGolden(t)
	const n = 16
	solo := greedyTokens(t, m, g.IDs, n)
	a := greedySession(t, m, 0)
	b := greedySession(t, m, 0)

	firstPiece := make(chan struct{})
	cancelled := make(chan struct{})
	var wg sync.WaitGroup
	var errA, errB error
	var tokensB []Token
	wg.Add(3)
	go func() { // the canceller
		defer wg.Done()
		runtime.LockOSThread()
		<-firstPiece
		if err := a.Cancel(); err != nil {
			t.Error(err)
		}
		close(cancelled)
	}()
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		first := true
		_, errA = a.Generate(context.Background(), g.IDs, GenerateOptions{MaxTokens: 200}, func(string) bool {
			if first { // hold the call until the cancel is issued
				first = false
				close(firstPiece)
				<-cancelled
			}
			return true
		})
	}()
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		ctx := context.Background()
		if errB = b.Prefill(ctx, g.IDs); errB != nil {
			return
		}
		for i := 0; i < n; i++ {
			tok, err := b.Decode(ctx)
			if err != nil {
				errB = err
				return
			}
			tokensB = append(tokensB, tok)
		}
	}()
	wg.Wait()
	wantStatus(t, errA, ErrCancelled, "cancelled generation")
	if errB != nil || !equal(tokensB, solo) {
		t.Fatalf("session B: %v %v, solo %v", tokensB, errB, solo)
	}
	if nt, _ := a.NTokens(); nt != 0 {
		t.Fatalf("a failed generate left %d tokens", nt)
	}
	if err := a.Prefill(context.Background(), g.IDs); err != nil {
		t.Fatal(err)
	}
	if tok, err := a.Decode(context.Background()); err != nil || tok != solo[0] {
		t.Fatal(tok, err)
	}
}

func TestContextCancellation(t *testing.T) {
	m := loadModel(t, false)
	s := greedySession(t, m, 0)
	prompt, _ := m.Tokenize("Once upon a time", true, false)

	ctx, cancel := context.WithCancel(context.Background())
	_, err := s.Generate(ctx, prompt, GenerateOptions{MaxTokens: 200}, func(string) bool {
		cancel()
		return true
	})
	wantStatus(t, err, ErrCancelled, "context cancelled")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v does not unwrap to context.Canceled", err)
	}
	if nt, _ := s.NTokens(); nt != 0 {
		t.Fatalf("%d tokens left", nt)
	}
	// An already-done context: refused before the call.
	_, err = s.Decode(ctx)
	wantStatus(t, err, ErrCancelled, "done context")

	// A cancel landing after the call returned must not cancel the next call.
	if err := s.Prefill(context.Background(), prompt); err != nil {
		t.Fatal(err)
	}
	issued := make(chan struct{})
	testHookCancelIssued = func() { close(issued) }
	defer func() { testHookCancelIssued = nil }()
	ctx2, cancel2 := context.WithCancel(context.Background())
	err = s.withContext(ctx2, func(cHandle) error {
		cancel2() // the "call" has finished its work; the cancel arrives now
		<-issued
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(context.Background()); err != nil {
		t.Fatalf("a late context cancel leaked into the next call: %v", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	m := loadModel(t, false)
	s := greedySession(t, m, 0)
	other := greedySession(t, m, 0)
	ids, _ := m.Tokenize("Hello", true, false)
	if err := s.Prefill(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close() // twice: a no-op
	_, err := s.Decode(context.Background())
	wantStatus(t, err, ErrInvalidArgument, "decode after close")
	if !strings.Contains(err.Error(), "session") {
		t.Fatal(err)
	}
	wantStatus(t, s.Prefill(context.Background(), ids), ErrInvalidArgument, "prefill after close")
	_, err = s.Generate(context.Background(), ids, GenerateOptions{}, func(string) bool { return true })
	wantStatus(t, err, ErrInvalidArgument, "generate after close")
	_, err = s.Fork()
	wantStatus(t, err, ErrInvalidArgument, "fork after close")
	_, err = s.Save()
	wantStatus(t, err, ErrInvalidArgument, "save after close")
	wantStatus(t, s.Cancel(), ErrInvalidArgument, "cancel after close")
	_, _, err = s.Poll()
	wantStatus(t, err, ErrInvalidArgument, "poll after close")

	m.Close()
	_, err = m.Tokenize("Hello", true, false)
	wantStatus(t, err, ErrInvalidArgument, "tokenize after model close")
	if !strings.Contains(err.Error(), "model") {
		t.Fatal(err)
	}
	_, err = m.NewSession(nil)
	wantStatus(t, err, ErrInvalidArgument, "session on a closed model")
	// Sessions keep the model alive.
	if err := other.Prefill(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Decode(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputGivesStatusAndMessage(t *testing.T) {
	_, err := LoadModel("/nonexistent/model.gguf", nil)
	wantStatus(t, err, ErrIO, "missing file")
	if !strings.Contains(err.Error(), "/nonexistent/model.gguf") || !strings.HasPrefix(err.Error(), "LLM_ERR_IO: ") {
		t.Fatal(err)
	}

	m := loadModel(t, false)
	s := greedySession(t, m, 8)
	ctx := context.Background()
	_, err = s.Decode(ctx) // no logits yet
	wantStatus(t, err, ErrInvalidArgument, "decode before prefill")
	first := err.(*Error).Message
	err = s.Prefill(ctx, make([]Token, 20))
	wantStatus(t, err, ErrContextFull, "prompt longer than n_ctx")
	if err.(*Error).Message == first {
		t.Fatal("each error must carry its own call's message")
	}
	wantStatus(t, s.Prefill(ctx, []Token{1000000}), ErrInvalidArgument, "token out of vocab")
	_, err = m.TokenToPiece(-5, false)
	wantStatus(t, err, ErrInvalidArgument, "negative token")
	wantStatus(t, s.Rewind(ctx, 5), ErrInvalidArgument, "rewind past the end")
	err = s.Load([]byte("not a saved session"))
	if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrUnsupported) {
		t.Fatal(err)
	}
	_, err = s.Generate(ctx, []Token{1}, GenerateOptions{MaxTokens: -1}, nil)
	wantStatus(t, err, ErrInvalidArgument, "max_tokens -1")
	_, err = m.ChatFormat("no-such-template", []ChatMessage{{"user", "hi"}}, true)
	wantStatus(t, err, ErrUnsupported, "unknown template")
	// None of the failures changed the session.
	if nt, err := s.NTokens(); nt != 0 || err != nil {
		t.Fatal(nt, err)
	}
	if err := s.Prefill(ctx, []Token{1, 2}); err != nil {
		t.Fatal(err)
	}
}

func TestPanicInCallbackReachesCaller(t *testing.T) {
	m := loadModel(t, false)
	s := greedySession(t, m, 0)
	ids, _ := m.Tokenize("Hello", true, false)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		s.Generate(context.Background(), ids, GenerateOptions{MaxTokens: 8}, func(string) bool { panic("boom") })
		t.Fatal("no panic")
	}()
	if _, err := s.Generate(context.Background(), nil, GenerateOptions{MaxTokens: 4}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestForkSaveLoadStats(t *testing.T) {
	m := loadModel(t, false)
	s := greedySession(t, m, 0)
	ids, _ := m.Tokenize("The lantern", true, false)
	ctx := context.Background()
	if err := s.Prefill(ctx, ids); err != nil {
		t.Fatal(err)
	}
	saved, err := s.Save()
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	tok, _ := s.Decode(ctx)
	if ct, err := child.Decode(ctx); err != nil || ct != tok {
		t.Fatal(ct, tok, err)
	}
	r := greedySession(t, m, 0)
	if err := r.Load(saved); err != nil {
		t.Fatal(err)
	}
	if rt, err := r.Decode(ctx); err != nil || rt != tok {
		t.Fatal(rt, err)
	}
	logits, err := r.Logits()
	if err != nil || len(logits) != 49152 {
		t.Fatal(len(logits), err)
	}
	if kv, err := m.KVStats(); err != nil || kv.BlocksUsed == 0 || kv.NPools != 1 || kv.LocalBlocksUsed != 0 {
		t.Fatal(kv, err)
	}
	if bs, err := m.BatchStats(); err != nil || bs.StepsCompleted == 0 {
		t.Fatal(bs, err)
	}
	if st, err := s.Stats(); err != nil || st.Iterations == 0 {
		t.Fatal(st, err)
	}
}

func TestProgressAndLogCallbacks(t *testing.T) {
	path := modelPath(t)
	var mu sync.Mutex
	var messages []string
	if err := SetLogCallback(LogInfo, func(level int, m string) {
		mu.Lock()
		messages = append(messages, m)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	var seen []float32
	m, err := LoadModel(path, &ModelParams{NThreads: 1, Progress: func(p float32) bool {
		seen = append(seen, p)
		return true
	}})
	if err := SetLogCallback(LogError, nil); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if len(seen) == 0 || seen[len(seen)-1] != 1 {
		t.Fatalf("progress %v", seen)
	}
	mu.Lock()
	n := len(messages)
	mu.Unlock()
	if n == 0 {
		t.Fatal("no log message at INFO during a load")
	}
	_, err = LoadModel(path, &ModelParams{Progress: func(float32) bool { return false }})
	wantStatus(t, err, ErrCancelled, "load cancelled by its progress callback")
}

func TestStreamAbandonedByContext(t *testing.T) {
	m := loadModel(t, false)
	s := greedySession(t, m, 0)
	prompt, _ := m.Tokenize("Once upon a time", true, false)
	ctx, cancel := context.WithCancel(context.Background())
	pieces, wait := s.Stream(ctx, prompt, GenerateOptions{MaxTokens: 200})
	<-pieces // one piece, then walk away
	cancel()
	for range pieces { // the channel is closed once the generation ended
	}
	_, err := wait()
	// Either the cancel landed in the call, or the callback saw the done
	// context first and stopped the generation (LLM_OK, StopCallback).
	if err != nil {
		wantStatus(t, err, ErrCancelled, "abandoned stream")
	}
	// The session is free and usable again.
	if err := s.Prefill(context.Background(), prompt); err != nil {
		t.Fatalf("the session is not usable after an abandoned stream: %v", err)
	}
	if _, err := s.Decode(context.Background()); err != nil {
		t.Fatal(err)
	}
}
