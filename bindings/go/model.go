package llm

/*
#include <stdlib.h>
#include "llmgo.h"
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// Device selects where a model runs (llm_model_params.device).
type Device int32

const (
	DeviceAuto Device = C.LLM_DEVICE_AUTO // the best device of this build and host
	DeviceCPU  Device = C.LLM_DEVICE_CPU
	DeviceCUDA Device = C.LLM_DEVICE_CUDA // never a silent fallback to the CPU
)

// ModelParams are load options; zero fields take the library's defaults.
type ModelParams struct {
	VocabOnly     bool   // tokenizer and metadata only
	NThreads      int    // threads of the batched passes; 0 = physical cores
	KVBudgetBytes uint64 // cap on the KV block pool; 0 = default
	Deterministic bool   // batch-invariant kernels
	BatchTokens   int    // most tokens per batched pass; 0 = 256
	Device        Device
	DeviceIndex   int
	// Progress in [0, 1]; return false to cancel the load (StatusCancelled).
	// Runs on the goroutine calling LoadModel, inside the call.
	Progress func(progress float32) bool
}

// ModelInfo is llm_model_info.
type ModelInfo struct {
	VocabOnly                              bool
	NParams                                uint64
	NCtxTrain, NVocab, NLayer, NEmbd       int
	NHead, NHeadKV                         int
	BOSToken, EOSToken, EOTToken, PadToken Token // -1: none
	AddBOS                                 bool
	Architecture, Name                     string
	Device                                 Device
	DeviceIndex                            int
	// Bytes of the model file read in place, and host memory the backend
	// holds as its own copies of weights.
	MappedWeightBytes, WeightCopyBytes uint64
}

// Model is a loaded model. Safe for concurrent use. Close frees it (a
// finalizer does too); sessions keep their own reference, so a model may be
// closed before its sessions.
type Model struct {
	h atomic.Uintptr // 0 once closed
}

// LoadModel loads a GGUF file; p may be nil (defaults).
func LoadModel(path string, p *ModelParams) (*Model, error) {
	if err := CheckVersion(); err != nil {
		return nil, err
	}
	if p == nil {
		p = &ModelParams{}
	}
	var cp C.llm_model_params
	if st := C.llm_model_params_init_v(&cp, C.sizeof_llm_model_params); st != C.LLM_OK {
		return nil, &Error{Status: Status(st), Message: "llm_model_params_init_v refused the binding's struct size"}
	}
	cp.vocab_only = cBool(p.VocabOnly)
	cp.n_threads = C.int32_t(p.NThreads)
	cp.kv_budget_bytes = C.uint64_t(p.KVBudgetBytes)
	cp.deterministic = cBool(p.Deterministic)
	cp.batch_tokens = C.int32_t(p.BatchTokens)
	cp.device = C.int32_t(p.Device)
	cp.device_index = C.int32_t(p.DeviceIndex)

	var state *callbackState
	var handle cgo.Handle
	if p.Progress != nil {
		state = &callbackState{progress: p.Progress}
		handle = cgo.NewHandle(state)
		defer handle.Delete()
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var out C.uintptr_t
	err := call(func(e **C.char) C.llm_status {
		return C.llmgo_model_load(cpath, &cp, C.uintptr_t(handle), &out, e)
	})
	if state != nil {
		state.rethrow()
	}
	if err != nil {
		return nil, err
	}
	m := &Model{}
	m.h.Store(uintptr(out))
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

func (m *Model) handle() C.uintptr_t { return C.uintptr_t(m.h.Load()) }

// Close frees the model. Later calls on it fail with StatusInvalidArgument
// ("not a live model handle"); closing twice is a no-op.
func (m *Model) Close() error {
	if h := m.h.Swap(0); h != 0 {
		C.llmgo_model_free(C.uintptr_t(h))
	}
	runtime.SetFinalizer(m, nil)
	return nil
}

func cString(chars []C.char) string {
	b := make([]byte, 0, len(chars))
	for _, c := range chars {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// Info describes the model.
func (m *Model) Info() (ModelInfo, error) {
	var ci C.llm_model_info
	err := call(func(e **C.char) C.llm_status { return C.llmgo_model_get_info(m.handle(), &ci, e) })
	runtime.KeepAlive(m)
	if err != nil {
		return ModelInfo{}, err
	}
	return ModelInfo{
		VocabOnly: ci.vocab_only != 0, NParams: uint64(ci.n_params),
		NCtxTrain: int(ci.n_ctx_train), NVocab: int(ci.n_vocab), NLayer: int(ci.n_layer),
		NEmbd: int(ci.n_embd), NHead: int(ci.n_head), NHeadKV: int(ci.n_head_kv),
		BOSToken: Token(ci.bos_token), EOSToken: Token(ci.eos_token),
		EOTToken: Token(ci.eot_token), PadToken: Token(ci.pad_token), AddBOS: ci.add_bos != 0,
		Architecture: cString(ci.architecture[:]), Name: cString(ci.name[:]),
		Device: Device(ci.device), DeviceIndex: int(ci.device_index),
		MappedWeightBytes: uint64(ci.mapped_weight_bytes), WeightCopyBytes: uint64(ci.weight_copy_bytes),
	}, nil
}

// Tokenize returns the token ids of text. addSpecial: BOS/EOS as the model
// asks; parseSpecial: control-token text becomes control tokens.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]Token, error) {
	defer runtime.KeepAlive(m)
	b := []byte(text)
	var ptr *C.char
	if len(b) > 0 {
		ptr = (*C.char)(unsafe.Pointer(&b[0]))
	}
	tokens := make([]Token, len(b)+4)
	for {
		var n C.size_t
		err := call(func(e **C.char) C.llm_status {
			return C.llmgo_tokenize(m.handle(), ptr, C.size_t(len(b)), cBool(addSpecial),
				cBool(parseSpecial), tokenPtr(tokens), C.size_t(len(tokens)), &n, e)
		})
		if statusOf(err) == StatusBufferTooSmall && int(n) > len(tokens) {
			tokens = make([]Token, int(n))
			continue
		}
		if err != nil {
			return nil, err
		}
		return tokens[:int(n)], nil
	}
}

// TokenToPiece returns the bytes of one token (possibly part of a UTF-8
// sequence).
func (m *Model) TokenToPiece(token Token, renderSpecial bool) ([]byte, error) {
	defer runtime.KeepAlive(m)
	buf := make([]byte, 32)
	for {
		var n C.size_t
		err := call(func(e **C.char) C.llm_status {
			return C.llmgo_token_to_piece(m.handle(), C.llm_token(token), cBool(renderSpecial),
				(*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n, e)
		})
		if statusOf(err) == StatusBufferTooSmall && int(n) > len(buf) {
			buf = make([]byte, int(n))
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:int(n)], nil
	}
}

// Detokenize returns the text of a token sequence.
func (m *Model) Detokenize(tokens []Token, renderSpecial bool) (string, error) {
	defer runtime.KeepAlive(m)
	buf := make([]byte, len(tokens)*8+1)
	for {
		var n C.size_t
		err := call(func(e **C.char) C.llm_status {
			return C.llmgo_detokenize(m.handle(), tokenPtr(tokens), C.size_t(len(tokens)),
				cBool(renderSpecial), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n, e)
		})
		if statusOf(err) == StatusBufferTooSmall && int(n)+1 > len(buf) {
			buf = make([]byte, int(n)+1)
			continue
		}
		if err != nil {
			return "", err
		}
		return string(buf[:int(n)]), nil
	}
}

// IsEOG reports whether token ends a generation (EOS, EOT, ...).
func (m *Model) IsEOG(token Token) (bool, error) {
	var out C.int32_t
	err := call(func(e **C.char) C.llm_status {
		return C.llmgo_token_is_eog(m.handle(), C.llm_token(token), &out, e)
	})
	runtime.KeepAlive(m)
	return out != 0, err
}

// ChatMessage is one chat turn.
type ChatMessage struct{ Role, Content string }

// ChatFormat formats messages with the model's chat template (template "")
// or a built-in one ("chatml", "llama3", ...).
func (m *Model) ChatFormat(template string, messages []ChatMessage, addGenerationPrompt bool) (string, error) {
	defer runtime.KeepAlive(m)
	var ctemplate *C.char
	if template != "" {
		ctemplate = C.CString(template)
		defer C.free(unsafe.Pointer(ctemplate))
	}
	// C strings in Go memory: allowed (no Go pointers inside).
	cmsgs := make([]C.llm_chat_message, len(messages)+1)
	for i, msg := range messages {
		cmsgs[i].role = C.CString(msg.Role)
		cmsgs[i].content = C.CString(msg.Content)
		defer C.free(unsafe.Pointer(cmsgs[i].role))
		defer C.free(unsafe.Pointer(cmsgs[i].content))
	}
	buf := make([]byte, 256)
	for {
		var n C.size_t
		err := call(func(e **C.char) C.llm_status {
			return C.llmgo_chat_format(m.handle(), ctemplate, &cmsgs[0], C.size_t(len(messages)),
				cBool(addGenerationPrompt), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n, e)
		})
		if statusOf(err) == StatusBufferTooSmall && int(n)+1 > len(buf) {
			buf = make([]byte, int(n)+1)
			continue
		}
		if err != nil {
			return "", err
		}
		return string(buf[:int(n)]), nil
	}
}

// KVStats is llm_kv_stats (the model's KV block pool).
type KVStats struct {
	BlockTokens                                 uint32
	BudgetBytes, BlockBytes, BlockOverheadBytes uint64
	BlocksTotal, BlocksAllocated, BlocksUsed    uint64
	BlocksShared, BlocksCached, PrefixHits      uint64
	BytesPerTokenF16, BytesPerTokenF32          uint64
	// A model mixing sliding-window and full-attention layers (Gemma 2/3)
	// has a second pool for its windowed ("local") layers; else NPools is 1
	// and the Local fields are 0.
	NPools, LocalWindow                                   uint32
	LocalBudgetBytes, LocalBlockBytes, LocalBlocksTotal   uint64
	LocalBlocksAllocated, LocalBlocksUsed                 uint64
	LocalBlocksShared, LocalBlocksCached, LocalPrefixHits uint64
}

// KVStats reports the model's KV block pool.
func (m *Model) KVStats() (KVStats, error) {
	var s C.llm_kv_stats
	err := call(func(e **C.char) C.llm_status { return C.llmgo_kv_stats(m.handle(), &s, e) })
	runtime.KeepAlive(m)
	return KVStats{uint32(s.block_tokens), uint64(s.budget_bytes), uint64(s.block_bytes),
		uint64(s.block_overhead_bytes), uint64(s.blocks_total), uint64(s.blocks_allocated),
		uint64(s.blocks_used), uint64(s.blocks_shared), uint64(s.blocks_cached),
		uint64(s.prefix_hits), uint64(s.bytes_per_token_f16), uint64(s.bytes_per_token_f32),
		uint32(s.n_pools), uint32(s.local_window), uint64(s.local_budget_bytes),
		uint64(s.local_block_bytes), uint64(s.local_blocks_total), uint64(s.local_blocks_allocated),
		uint64(s.local_blocks_used), uint64(s.local_blocks_shared), uint64(s.local_blocks_cached),
		uint64(s.local_prefix_hits)}, err
}

// BatchStats is llm_batch_stats (the model's batcher counters).
type BatchStats struct {
	Iterations, DecodeIterations, DecodeRows, PrefillChunks uint64
	Tokens, MaxSessionsInPass, StepsCompleted, StepsFailed  uint64
}

// BatchStats reports the model's batcher counters.
func (m *Model) BatchStats() (BatchStats, error) {
	var s C.llm_batch_stats
	err := call(func(e **C.char) C.llm_status { return C.llmgo_batch_stats(m.handle(), &s, e) })
	runtime.KeepAlive(m)
	return BatchStats{uint64(s.iterations), uint64(s.decode_iterations), uint64(s.decode_rows),
		uint64(s.prefill_chunks), uint64(s.tokens), uint64(s.max_sessions_in_pass),
		uint64(s.steps_completed), uint64(s.steps_failed)}, err
}
