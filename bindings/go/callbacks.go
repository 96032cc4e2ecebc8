package llm

// Go functions libllm calls back through llmgo.c's trampolines. Closures
// travel as cgo.Handle values in the callbacks' `void *user`.

/*
#include "llmgo.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
)

// callbackState is what a cgo.Handle of a Progress or onPiece callback holds.
type callbackState struct {
	progress func(float32) bool
	piece    func(string) bool
	panicked interface{}
	didPanic bool
}

// run calls f, turning a panic into "stop" and remembering it.
func (s *callbackState) run(f func() bool) (stop C.int32_t) {
	if s.didPanic {
		return 1
	}
	defer func() {
		if r := recover(); r != nil {
			s.panicked, s.didPanic = r, true
			stop = 1
		}
	}()
	if f() {
		return 0
	}
	return 1
}

// rethrow re-raises a callback's panic on the calling goroutine.
func (s *callbackState) rethrow() {
	if s.didPanic {
		panic(s.panicked)
	}
}

//export llmgoProgress
func llmgoProgress(progress C.float, handle C.uintptr_t) C.int32_t {
	s := cgo.Handle(handle).Value().(*callbackState)
	return s.run(func() bool { return s.progress(float32(progress)) })
}

//export llmgoPiece
func llmgoPiece(text *C.char, n C.size_t, handle C.uintptr_t) C.int32_t {
	s := cgo.Handle(handle).Value().(*callbackState)
	piece := C.GoStringN(text, C.int(n))
	return s.run(func() bool { return s.piece(piece) })
}

var logMu sync.RWMutex
var logSink func(level int, message string)

//export llmgoLog
func llmgoLog(level C.int32_t, message *C.char) {
	logMu.RLock()
	sink := logSink
	logMu.RUnlock()
	if sink != nil {
		func() {
			defer func() { _ = recover() }() // nobody to hand a panic to
			sink(int(level), C.GoString(message))
		}()
	}
}

// Log levels of SetLogCallback.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// SetLogCallback sends libllm's messages at minLevel and above to sink, which
// runs on any libllm thread; nil discards them (the default).
func SetLogCallback(minLevel int, sink func(level int, message string)) error {
	logMu.Lock()
	logSink = sink
	logMu.Unlock()
	return call(func(e **C.char) C.llm_status {
		return C.llmgo_set_log(cBool(sink != nil), C.int32_t(minLevel), e)
	})
}
