// Package llm is the Go binding of libllm, an embeddable LLM inference
// library (include/llm/llm.h), through cgo.
//
// Linking: the package uses `#cgo pkg-config: llm`. With libllm installed
// (cmake --install build --prefix P) set PKG_CONFIG_PATH=P/lib/pkgconfig
// and, outside the loader's default paths, LD_LIBRARY_PATH=P/lib. Against a
// build directory, point PKG_CONFIG_PATH at a directory holding an llm.pc
// whose Libs and Cflags name the build directory and the repository's
// include/ (bindings/go/test.sh writes one), or set PKG_CONFIG=true (a
// pkg-config that answers nothing) with CGO_CFLAGS=-I<repo>/include and
// CGO_LDFLAGS="-L<build> -lllm".
//
// Threads: a Model may be used from any number of goroutines. A Session
// serves one call at a time (a second concurrent call fails with
// StatusBusy); different sessions may be driven from different goroutines at
// once, and the model batches their steps. Callbacks: the onPiece function of
// Session.Generate and ModelParams.Progress run on the goroutine that made
// the call, inside it (on its OS thread); the SetLogCallback function runs on
// any libllm thread, so it must be safe for concurrent use. A panic in
// onPiece or Progress stops the call and is re-raised when it returns.
//
// Errors: every failing call returns an *Error with the libllm status and
// the message llm_last_error() gave, copied inside the same C call (a
// goroutine may change threads between two cgo calls and the message is
// thread-local). Compare with errors.Is(err, llm.ErrCancelled) and so on.
//
// Version: this package was written for libllm 0.3. LoadModel checks
// llm_version() and refuses another major version, and for 0.x another minor
// version, with StatusUnsupported and a message naming both.
package llm

/*
#cgo pkg-config: llm
#include <stdlib.h>
#include "llmgo.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// The libllm version this package was written for.
const (
	BindingMajor = 0
	BindingMinor = 3
)

// Token is a token id of the model's vocabulary.
type Token = int32

// Version is the loaded library's version, e.g. "0.3.0".
func Version() string { return C.GoString(C.llm_version()) }

// compatible reports whether a library major.minor serves this package:
// the same major and at least its minor; for 0.x exactly its minor.
func compatible(major, minor int) bool {
	if major != BindingMajor {
		return false
	}
	if BindingMajor == 0 {
		return minor == BindingMinor
	}
	return minor >= BindingMinor
}

func checkVersionString(v string) error {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) >= 2 {
		major, err1 := strconv.Atoi(parts[0])
		minor, err2 := strconv.Atoi(parts[1])
		if err1 == nil && err2 == nil && compatible(major, minor) {
			return nil
		}
	}
	return &Error{Status: StatusUnsupported, Message: fmt.Sprintf(
		"libllm %s is not supported: this Go binding was written for libllm %d.%d "+
			"(0.x releases must match major and minor)", v, BindingMajor, BindingMinor)}
}

var versionOnce sync.Once
var versionErr error

// CheckVersion checks the loaded library's version once per process.
func CheckVersion() error {
	versionOnce.Do(func() { versionErr = checkVersionString(Version()) })
	return versionErr
}

// Status is a libllm status code other than LLM_OK.
type Status int32

const (
	StatusInvalidArgument Status = C.LLM_ERR_INVALID_ARGUMENT
	StatusIO              Status = C.LLM_ERR_IO
	StatusBadModel        Status = C.LLM_ERR_BAD_MODEL
	StatusUnsupported     Status = C.LLM_ERR_UNSUPPORTED
	StatusOutOfMemory     Status = C.LLM_ERR_OUT_OF_MEMORY
	StatusContextFull     Status = C.LLM_ERR_CONTEXT_FULL
	StatusKVFull          Status = C.LLM_ERR_KV_FULL
	StatusCancelled       Status = C.LLM_ERR_CANCELLED
	StatusBufferTooSmall  Status = C.LLM_ERR_BUFFER_TOO_SMALL
	StatusBusy            Status = C.LLM_ERR_BUSY
	StatusDevice          Status = C.LLM_ERR_DEVICE
	StatusInternal        Status = C.LLM_ERR_INTERNAL
)

// String is the library's name of the status, e.g. "LLM_ERR_IO".
func (s Status) String() string { return C.GoString(C.llm_status_string(C.llm_status(s))) }

// Error is a failed libllm call: its status and the library's message.
type Error struct {
	Status  Status
	Message string
	// The context error when a context's cancellation cancelled the call.
	cause error
}

func (e *Error) Error() string { return e.Status.String() + ": " + e.Message }

// Is matches the sentinels (ErrCancelled, ...): an *Error without a message
// matches every error of its status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// Unwrap gives context.Canceled / DeadlineExceeded when a context cancelled
// the call.
func (e *Error) Unwrap() error { return e.cause }

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrIO              = &Error{Status: StatusIO}
	ErrBadModel        = &Error{Status: StatusBadModel}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrContextFull     = &Error{Status: StatusContextFull}
	ErrKVFull          = &Error{Status: StatusKVFull}
	ErrCancelled       = &Error{Status: StatusCancelled}
	ErrBufferTooSmall  = &Error{Status: StatusBufferTooSmall}
	ErrBusy            = &Error{Status: StatusBusy}
	ErrDevice          = &Error{Status: StatusDevice}
	ErrInternal        = &Error{Status: StatusInternal}
)

// call runs one C helper and turns its status and copied message into an
// error.
func call(f func(err **C.char) C.llm_status) error {
	var msg *C.char
	st := f(&msg)
	if st == C.LLM_OK {
		return nil
	}
	e := &Error{Status: Status(st)}
	if msg != nil {
		e.Message = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return e
}

func statusOf(err error) Status {
	if e, ok := err.(*Error); ok {
		return e.Status
	}
	return 0
}

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// tokenPtr points C at a token slice (Go memory without Go pointers).
func tokenPtr(tokens []Token) *C.llm_token {
	if len(tokens) == 0 {
		return nil
	}
	return (*C.llm_token)(unsafe.Pointer(&tokens[0]))
}
