// What the ABI's opaque handles are, and the guard every extern "C" body runs
// in: argument errors and engine failures become an llm_status plus a
// thread-local message; no exception crosses the boundary.
#pragma once

#include <memory>
#include <cstring>
#include <new>
#include <string>

#include "absl/status/status.h"
#include "engine/model.h"
#include "engine/session.h"
#include "llm/llm.h"

// The public llm_model* / llm_session* values are not pointers to objects:
// they are ids from a registry of live handles (src/api/registry.cpp), never
// reused within a process. Every call looks its handle up before touching
// anything, so a NULL, freed or foreign handle is refused with
// LLM_ERR_INVALID_ARGUMENT without dereferencing it (also under ASan), and
// freeing a stale handle is a no-op. struct llm_model / llm_session stay
// incomplete types.

namespace llm::api {

// ---- models --------------------------------------------------------------
// Registers a loaded model and returns its new handle (throws std::bad_alloc
// when the registry cannot grow; the model is then released).
llm_model* RegisterModel(std::shared_ptr<const Model> model);
// The model behind a live handle (a new reference: valid even if another
// thread frees the handle meanwhile), or nullptr for NULL/stale/foreign.
std::shared_ptr<const Model> FindModel(const llm_model* handle);
// Drops the handle's reference; unknown handles are ignored.
void FreeModel(llm_model* handle) noexcept;

// ---- sessions ------------------------------------------------------------
// Registers a session and returns its new handle (throws std::bad_alloc; the
// session is then destroyed).
llm_session* RegisterSession(std::unique_ptr<Session> session);
// Frees the session behind a live handle. If a call is using it (another
// thread, or a callback of that very call), the handle dies now and the
// session is destroyed when that call returns. Unknown handles are ignored.
void FreeSession(llm_session* handle) noexcept;

struct SessionEntry;

// Exclusive use of a session for the duration of one API call: Acquire fails
// with INVALID_ARGUMENT for a NULL/stale/foreign handle and with LLM_ERR_BUSY
// while another call (another thread, or a re-entrant call from a callback)
// holds it. The destructor releases it (and destroys it if it was freed in
// the meantime).
class SessionLease {
 public:
  SessionLease() = default;
  ~SessionLease();
  SessionLease(const SessionLease&) = delete;
  SessionLease& operator=(const SessionLease&) = delete;

  llm_status Acquire(const llm_session* handle);
  Session& operator*() const { return *session_; }
  Session* operator->() const { return session_; }
  // llm_session_free was called on the handle during this call.
  bool free_requested() const;

 private:
  SessionEntry* entry_ = nullptr;
  Session* session_ = nullptr;
};

// For the calls documented as allowed while another call uses the session
// (llm_session_cancel, llm_session_get_stats): runs fn on the session under
// the registry lock, without a lease, so the session cannot be destroyed
// meanwhile. fn must be short and must not call back into the registry.
// NULL/stale/foreign -> INVALID_ARGUMENT.
llm_status WithSessionUnleased(const llm_session* handle, void (*fn)(Session&, void*), void* arg);

// Acquire, then LLM_ERR_BUSY while a step submitted with the non-blocking
// API is not collected yet (every call but poll/wait/cancel/stats/free).
llm_status AcquireIdle(SessionLease& lease, const llm_session* handle);

// Number of live handles (tests: a free really unregistered).
size_t LiveHandleCount();

// Records the failure for llm_last_error() and returns its status.
llm_status Fail(llm_status status, const std::string& message);
llm_status Fail(const absl::Status& status);
void ClearError();
// LLM_ERR_INTERNAL with "internal error: <what>"; never throws (the message
// is dropped if it cannot be allocated), so a catch handler can call it.
llm_status FailInternal(const char* what) noexcept;

// Copies text (plus NUL when nul_terminate) into a caller buffer following the
// capacity rule; *len_out receives the length without NUL.
llm_status CopyOut(const std::string& text, bool nul_terminate, char* buf, size_t capacity,
                   size_t* len_out);

}  // namespace llm::api

// Wrap every extern "C" body: LLM_API_BEGIN ... LLM_API_END
#define LLM_API_BEGIN \
  try {               \
    ::llm::api::ClearError();
#define LLM_API_END                                                                          \
  }                                                                                          \
  catch (const std::bad_alloc&) {                                                            \
    return ::llm::api::Fail(LLM_ERR_OUT_OF_MEMORY, "out of memory");                         \
  }                                                                                          \
  catch (const std::exception& e) {                                                          \
    return ::llm::api::FailInternal(e.what());                                               \
  }                                                                                          \
  catch (...) {                                                                              \
    return ::llm::api::FailInternal("unknown exception");                                    \
  }

#define LLM_CHECK_ARG(cond, message)                                       \
  do {                                                                     \
    if (!(cond)) return ::llm::api::Fail(LLM_ERR_INVALID_ARGUMENT, message); \
  } while (0)
