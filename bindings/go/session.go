package llm

/*
#include <stdlib.h>
#include "llmgo.h"
*/
import "C"

import (
	"context"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"
)

// SamplerParams are llm_sampler_params.
type SamplerParams struct {
	Temperature      float32 // <= 0: greedy
	TopK             int     // <= 0: off
	TopP             float32 // >= 1: off
	MinP             float32 // <= 0: off
	RepeatPenalty    float32 // 1: off
	PresencePenalty  float32
	FrequencyPenalty float32
	PenaltyLastN     int
}

// DefaultSamplerParams are the library's defaults.
func DefaultSamplerParams() SamplerParams {
	var p C.llm_sampler_params
	C.llm_sampler_params_init_v(&p, C.sizeof_llm_sampler_params)
	return SamplerParams{float32(p.temperature), int(p.top_k), float32(p.top_p), float32(p.min_p),
		float32(p.repeat_penalty), float32(p.presence_penalty), float32(p.frequency_penalty),
		int(p.penalty_last_n)}
}

// GreedySampler is the library's defaults with temperature 0.
func GreedySampler() SamplerParams {
	p := DefaultSamplerParams()
	p.Temperature = 0
	return p
}

func (p SamplerParams) toC() C.llm_sampler_params {
	return C.llm_sampler_params{
		struct_size: C.sizeof_llm_sampler_params, // frozen: exactly this size
		temperature: C.float(p.Temperature), top_k: C.int32_t(p.TopK), top_p: C.float(p.TopP),
		min_p: C.float(p.MinP), repeat_penalty: C.float(p.RepeatPenalty),
		presence_penalty: C.float(p.PresencePenalty), frequency_penalty: C.float(p.FrequencyPenalty),
		penalty_last_n: C.int32_t(p.PenaltyLastN),
	}
}

// SessionParams are session options; zero fields take the library's defaults.
type SessionParams struct {
	NCtx    int // context length; 0 = the model's trained context, capped at 4096
	KVF32   bool
	Seed    uint64
	Sampler *SamplerParams // nil: DefaultSamplerParams()
}

// Session is one conversation. It serves one call at a time (concurrent calls
// fail with StatusBusy); Cancel may be called from any goroutine. Close frees
// it (a finalizer does too).
type Session struct {
	h atomic.Uintptr // 0 once closed
}

// NewSession creates a session; p may be nil (defaults).
func (m *Model) NewSession(p *SessionParams) (*Session, error) {
	defer runtime.KeepAlive(m)
	if p == nil {
		p = &SessionParams{}
	}
	var cp C.llm_session_params
	if st := C.llm_session_params_init_v(&cp, C.sizeof_llm_session_params); st != C.LLM_OK {
		return nil, &Error{Status: Status(st), Message: "llm_session_params_init_v refused the binding's struct size"}
	}
	cp.n_ctx = C.int32_t(p.NCtx)
	if p.KVF32 {
		cp.kv_type = C.LLM_KV_F32
	}
	cp.seed = C.uint64_t(p.Seed)
	if p.Sampler != nil {
		cp.sampler = p.Sampler.toC()
	}
	var out C.uintptr_t
	if err := call(func(e **C.char) C.llm_status {
		return C.llmgo_session_create(m.handle(), &cp, &out, e)
	}); err != nil {
		return nil, err
	}
	return newSession(out), nil
}

func newSession(h C.uintptr_t) *Session {
	s := &Session{}
	s.h.Store(uintptr(h))
	runtime.SetFinalizer(s, (*Session).Close)
	return s
}

func (s *Session) handle() C.uintptr_t { return C.uintptr_t(s.h.Load()) }

// Close frees the session; a call in flight on another goroutine finishes
// (a generation stops at its next piece). Later calls fail with
// StatusInvalidArgument ("not a live session handle"); closing twice is a
// no-op.
func (s *Session) Close() error {
	if h := s.h.Swap(0); h != 0 {
		C.llmgo_session_free(C.uintptr_t(h))
	}
	runtime.SetFinalizer(s, nil)
	return nil
}

// Cancel cancels the call in flight on the session (or, with none, its next
// call that runs the model): it fails with StatusCancelled and leaves the
// session as it was. Safe from any goroutine.
func (s *Session) Cancel() error {
	defer runtime.KeepAlive(s)
	return call(func(e **C.char) C.llm_status { return C.llmgo_session_cancel(s.handle(), e) })
}

// cHandle is a libllm handle as the C helpers take it.
type cHandle = C.uintptr_t

// testHookCancelIssued, when set (by tests), runs after withContext's
// watcher handled a done context.
var testHookCancelIssued func()

// withContext runs a blocking call that runs the model, cancelling it through
// llm_session_cancel when ctx is done. A cancel that arrives after the call
// returned would stay latched for the session's next call; it is consumed
// here instead (llmgo_absorb_cancel), so a context never cancels a later
// call.
func (s *Session) withContext(ctx context.Context, f func(h C.uintptr_t) error) error {
	defer runtime.KeepAlive(s)
	if ctx == nil {
		ctx = context.Background()
	}
	h := s.handle()
	if err := ctx.Err(); err != nil {
		return &Error{Status: StatusCancelled, Message: "context done before the call: " + err.Error(), cause: err}
	}
	if ctx.Done() == nil {
		return f(h)
	}
	var mu sync.Mutex
	inCall, issued := true, false
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			mu.Lock()
			if inCall {
				C.llmgo_session_cancel(h, nil)
				issued = true
			}
			hook := testHookCancelIssued // read under mu: ordered with the test's writes
			mu.Unlock()
			if hook != nil {
				hook()
			}
		case <-stop:
		}
	}()
	err := f(h)
	mu.Lock()
	inCall = false
	wasIssued := issued
	mu.Unlock()
	close(stop)
	if wasIssued {
		if statusOf(err) == StatusCancelled {
			err.(*Error).cause = ctx.Err()
		} else {
			C.llmgo_absorb_cancel(h)
		}
	}
	return err
}

// Prefill appends tokens and runs them.
func (s *Session) Prefill(ctx context.Context, tokens []Token) error {
	return s.withContext(ctx, func(h C.uintptr_t) error {
		return call(func(e **C.char) C.llm_status {
			return C.llmgo_session_prefill(h, tokenPtr(tokens), C.size_t(len(tokens)), e)
		})
	})
}

// Decode samples the next token, appends it and runs it.
func (s *Session) Decode(ctx context.Context) (Token, error) {
	var t C.llm_token = -1
	err := s.withContext(ctx, func(h C.uintptr_t) error {
		return call(func(e **C.char) C.llm_status { return C.llmgo_session_decode(h, &t, e) })
	})
	return Token(t), err
}

// Rewind keeps the first n tokens (recomputing the last one's logits).
func (s *Session) Rewind(ctx context.Context, n int) error {
	return s.withContext(ctx, func(h C.uintptr_t) error {
		return call(func(e **C.char) C.llm_status { return C.llmgo_session_rewind(h, C.size_t(n), e) })
	})
}

// Logits returns a copy of the next-token logits.
func (s *Session) Logits() ([]float32, error) {
	defer runtime.KeepAlive(s)
	var n C.size_t
	if err := call(func(e **C.char) C.llm_status {
		return C.llmgo_session_logits(s.handle(), nil, 0, &n, e)
	}); err != nil {
		return nil, err
	}
	out := make([]float32, int(n))
	err := call(func(e **C.char) C.llm_status {
		return C.llmgo_session_logits(s.handle(), (*C.float)(unsafe.Pointer(&out[0])), n, &n, e)
	})
	return out, err
}

// NTokens is the number of tokens in the session's history.
func (s *Session) NTokens() (int, error) {
	defer runtime.KeepAlive(s)
	var n C.size_t
	err := call(func(e **C.char) C.llm_status { return C.llmgo_session_n_tokens(s.handle(), &n, e) })
	return int(n), err
}

// SetSampler replaces the sampler settings.
func (s *Session) SetSampler(p SamplerParams) error {
	defer runtime.KeepAlive(s)
	cp := p.toC()
	return call(func(e **C.char) C.llm_status { return C.llmgo_session_set_sampler(s.handle(), &cp, e) })
}

// Reset clears history, KV and logits, re-seeds the RNG and clears a cancel.
func (s *Session) Reset() error {
	defer runtime.KeepAlive(s)
	return call(func(e **C.char) C.llm_status { return C.llmgo_session_reset(s.handle(), e) })
}

// SetSeed re-seeds the session's RNG.
func (s *Session) SetSeed(seed uint64) error {
	defer runtime.KeepAlive(s)
	return call(func(e **C.char) C.llm_status { return C.llmgo_session_set_seed(s.handle(), C.uint64_t(seed), e) })
}

// Fork returns a session continuing exactly where s stands, sharing its KV
// blocks copy-on-write.
func (s *Session) Fork() (*Session, error) {
	defer runtime.KeepAlive(s)
	var out C.uintptr_t
	if err := call(func(e **C.char) C.llm_status { return C.llmgo_session_fork(s.handle(), &out, e) }); err != nil {
		return nil, err
	}
	return newSession(out), nil
}

// Save serializes the session (docs/SESSION_FORMAT.md).
func (s *Session) Save() ([]byte, error) {
	defer runtime.KeepAlive(s)
	var n C.size_t
	err := call(func(e **C.char) C.llm_status { return C.llmgo_session_save(s.handle(), nil, 0, &n, e) })
	if err != nil && statusOf(err) != StatusBufferTooSmall {
		return nil, err
	}
	buf := make([]byte, int(n))
	err = call(func(e **C.char) C.llm_status {
		return C.llmgo_session_save(s.handle(), unsafe.Pointer(&buf[0]), n, &n, e)
	})
	if err != nil {
		return nil, err
	}
	return buf[:int(n)], nil
}

// Load replaces the session's state with bytes from Save.
func (s *Session) Load(state []byte) error {
	defer runtime.KeepAlive(s)
	var p unsafe.Pointer
	if len(state) > 0 {
		p = unsafe.Pointer(&state[0])
	}
	return call(func(e **C.char) C.llm_status { return C.llmgo_session_load(s.handle(), p, C.size_t(len(state)), e) })
}

// SessionStats are llm_session_stats.
type SessionStats struct{ Iterations, PrefillChunks, CachedTokens uint64 }

// Stats reports the session's batcher counters.
func (s *Session) Stats() (SessionStats, error) {
	defer runtime.KeepAlive(s)
	var st C.llm_session_stats
	err := call(func(e **C.char) C.llm_status { return C.llmgo_session_stats(s.handle(), &st, e) })
	return SessionStats{uint64(st.iterations), uint64(st.prefill_chunks), uint64(st.cached_tokens)}, err
}

// SubmitPrefill queues a prefill and returns at once (collect it with Poll).
func (s *Session) SubmitPrefill(tokens []Token) error {
	defer runtime.KeepAlive(s)
	return call(func(e **C.char) C.llm_status {
		return C.llmgo_session_prefill_async(s.handle(), tokenPtr(tokens), C.size_t(len(tokens)), e)
	})
}

// SubmitDecode samples the next token now and queues its pass (collect the
// token with Poll).
func (s *Session) SubmitDecode() error {
	defer runtime.KeepAlive(s)
	return call(func(e **C.char) C.llm_status { return C.llmgo_session_decode_async(s.handle(), e) })
}

// Poll never blocks: done is false while the submitted step runs; once it
// ended, done is true and err is the step's result (token: a decode step's
// token).
func (s *Session) Poll() (token Token, done bool, err error) {
	defer runtime.KeepAlive(s)
	var d C.int32_t
	var t C.llm_token = -1
	err = call(func(e **C.char) C.llm_status { return C.llmgo_session_poll(s.handle(), &d, &t, e) })
	return Token(t), d != 0, err
}

// StopReason says why a generation ended (LLM_STOP_*).
type StopReason int32

const (
	StopEOG         StopReason = C.LLM_STOP_EOG
	StopMaxTokens   StopReason = C.LLM_STOP_MAX_TOKENS
	StopString      StopReason = C.LLM_STOP_STRING
	StopCallback    StopReason = C.LLM_STOP_CALLBACK
	StopContextFull StopReason = C.LLM_STOP_CONTEXT_FULL
)

// GenerateOptions are llm_generate_params.
type GenerateOptions struct {
	MaxTokens int      // 0: the library default (256)
	Stop      []string // stop strings
}

// GenerateResult is llm_generate_result.
type GenerateResult struct {
	StopReason                StopReason
	NPromptTokens, NGenerated int
	PrefillMs, DecodeMs       float64
}

// Generate prefills prompt (may be empty: continue from the current logits)
// and generates until an end-of-generation token, a stop string, MaxTokens,
// the end of the context, or onPiece returning false. onPiece (may be nil)
// gets UTF-8-complete text and runs on this goroutine, inside the call.
// Cancelling ctx cancels the generation (an *Error with StatusCancelled that
// unwraps to ctx.Err()); a failed generation leaves the session as it was.
func (s *Session) Generate(ctx context.Context, prompt []Token, opts GenerateOptions, onPiece func(piece string) bool) (GenerateResult, error) {
	var handle cgo.Handle
	var state *callbackState
	if onPiece != nil {
		state = &callbackState{piece: onPiece}
		handle = cgo.NewHandle(state)
		defer handle.Delete()
	}
	var stops **C.char
	if len(opts.Stop) > 0 {
		// A C array of C strings: C memory, so no Go pointer reaches C.
		mem := C.malloc(C.size_t(len(opts.Stop)) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
		arr := unsafe.Slice((**C.char)(mem), len(opts.Stop))
		for i, str := range opts.Stop {
			arr[i] = C.CString(str)
		}
		defer func() {
			for _, p := range arr {
				C.free(unsafe.Pointer(p))
			}
			C.free(mem)
		}()
		stops = &arr[0]
	}
	var res C.llm_generate_result
	err := s.withContext(ctx, func(h C.uintptr_t) error {
		return call(func(e **C.char) C.llm_status {
			return C.llmgo_generate(h, tokenPtr(prompt), C.size_t(len(prompt)), C.int32_t(opts.MaxTokens),
				stops, C.size_t(len(opts.Stop)), C.uintptr_t(handle), &res, e)
		})
	})
	if state != nil {
		state.rethrow()
	}
	if err != nil {
		return GenerateResult{}, err
	}
	return GenerateResult{StopReason(res.stop_reason), int(res.n_prompt_tokens), int(res.n_generated),
		float64(res.prefill_ms), float64(res.decode_ms)}, nil
}

// Stream runs Generate on a new goroutine and sends its pieces on the
// returned channel, which is closed when the generation ends; then wait
// returns its result. Cancel ctx to abandon the stream early (the channel is
// still closed).
func (s *Session) Stream(ctx context.Context, prompt []Token, opts GenerateOptions) (pieces <-chan string, wait func() (GenerateResult, error)) {
	if ctx == nil {
		ctx = context.Background()
	}
	ch := make(chan string, 16)
	done := make(chan struct{})
	var result GenerateResult
	var err error
	go func() {
		defer close(done)
		defer close(ch)
		result, err = s.Generate(ctx, prompt, opts, func(piece string) bool {
			select {
			case ch <- piece:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return ch, func() (GenerateResult, error) {
		<-done
		return result, err
	}
}
