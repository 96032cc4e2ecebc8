// The registry of live handles (see api/handles.h): handle values are ids
// from a 64-bit counter, never reused, mapped to the objects under one mutex.
// Lookups never dereference the caller's value, so a stale or foreign handle
// is refused without touching freed memory, and an id is never recycled, so
// a stale handle cannot alias a newer object (no ABA). std::unordered_map:
// an insert that throws std::bad_alloc leaves it unchanged (core/oom_safe.h).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include <unordered_map>

#include "api/handles.h"

namespace llm::api {

struct SessionEntry {
  std::unique_ptr<Session> session;
  bool busy = false;                       // guarded by Registry::mu
  std::atomic<bool> free_pending{false};   // set under mu, read by the lease holder
};

namespace {

// std::mutex rather than absl::Mutex: Debian's Abseil is not built with
// TSan, which then cannot see absl::Mutex's synchronisation and reports
// false races on everything it guards.
struct Registry {
  std::mutex mu;
  // Ids start high enough that small integers (0, 1, -1 cast, ...) are never
  // valid and step by 16 so they look like aligned pointers to C callers
  // that print them; tagged by kind in bit 3 so a session handle passed as a
  // model (or vice versa) is refused too.
  uint64_t next = 0x10000;
  std::unordered_map<uintptr_t, std::shared_ptr<const Model>> models;
  std::unordered_map<uintptr_t, SessionEntry*> sessions;
};

constexpr uint64_t kModelTag = 0x0;
constexpr uint64_t kSessionTag = 0x8;

// Never destroyed: handles may be freed from static destructors of the host.
Registry& R() {
  static Registry* r = new Registry();
  return *r;
}

uintptr_t NewId(Registry& r, uint64_t tag) {
  const uint64_t id = r.next | tag;
  r.next += 16;
  return static_cast<uintptr_t>(id);
}

}  // namespace

llm_model* RegisterModel(std::shared_ptr<const Model> model) {
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  const uintptr_t id = NewId(r, kModelTag);
  r.models.emplace(id, std::move(model));  // may throw: the model is released
  return reinterpret_cast<llm_model*>(id);
}

std::shared_ptr<const Model> FindModel(const llm_model* handle) {
  if (handle == nullptr) return nullptr;
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.models.find(reinterpret_cast<uintptr_t>(handle));
  return it == r.models.end() ? nullptr : it->second;
}

void FreeModel(llm_model* handle) noexcept {
  if (handle == nullptr) return;
  std::shared_ptr<const Model> doomed;  // released after the lock (munmap etc.)
  Registry& r = R();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.models.find(reinterpret_cast<uintptr_t>(handle));
    if (it == r.models.end()) return;
    doomed = std::move(it->second);
    r.models.erase(it);
  }
}

llm_session* RegisterSession(std::unique_ptr<Session> session) {
  auto entry = std::make_unique<SessionEntry>();
  entry->session = std::move(session);
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  const uintptr_t id = NewId(r, kSessionTag);
  r.sessions.emplace(id, entry.get());  // may throw: entry is destroyed
  entry.release();
  return reinterpret_cast<llm_session*>(id);
}

void FreeSession(llm_session* handle) noexcept {
  if (handle == nullptr) return;
  std::unique_ptr<SessionEntry> doomed;  // destroyed after the lock (joins threads)
  Registry& r = R();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.sessions.find(reinterpret_cast<uintptr_t>(handle));
    if (it == r.sessions.end()) return;
    SessionEntry* e = it->second;
    r.sessions.erase(it);
    if (e->busy) {
      e->free_pending.store(true, std::memory_order_relaxed);  // the lease frees it
    } else {
      doomed.reset(e);
    }
  }
}

namespace {

// The live entry behind a session handle (r.mu held), or a failure status.
llm_status FindSessionLocked(Registry& r, const llm_session* handle, SessionEntry** out) {
  if (handle == nullptr) return Fail(LLM_ERR_INVALID_ARGUMENT, "session must not be NULL");
  auto it = r.sessions.find(reinterpret_cast<uintptr_t>(handle));
  if (it == r.sessions.end()) {
    return Fail(LLM_ERR_INVALID_ARGUMENT,
                "session is not a live session handle (freed, or never returned by "
                "llm_session_create)");
  }
  *out = it->second;
  return LLM_OK;
}

}  // namespace

llm_status SessionLease::Acquire(const llm_session* handle) {
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  SessionEntry* e = nullptr;
  if (llm_status st = FindSessionLocked(r, handle, &e); st != LLM_OK) return st;
  if (e->busy) {
    return Fail(LLM_ERR_BUSY,
                "session is in use by another call (another thread, or a callback of a call "
                "on this session)");
  }
  e->busy = true;
  entry_ = e;
  session_ = e->session.get();
  return LLM_OK;
}

SessionLease::~SessionLease() {
  if (entry_ == nullptr) return;
  std::unique_ptr<SessionEntry> doomed;
  Registry& r = R();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    entry_->busy = false;
    if (entry_->free_pending.load(std::memory_order_relaxed)) doomed.reset(entry_);
  }
}

bool SessionLease::free_requested() const {
  return entry_ != nullptr && entry_->free_pending.load(std::memory_order_relaxed);
}

llm_status WithSessionUnleased(const llm_session* handle, void (*fn)(Session&, void*), void* arg) {
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  SessionEntry* e = nullptr;
  if (llm_status st = FindSessionLocked(r, handle, &e); st != LLM_OK) return st;
  fn(*e->session, arg);
  return LLM_OK;
}

llm_status AcquireIdle(SessionLease& lease, const llm_session* handle) {
  if (llm_status st = lease.Acquire(handle); st != LLM_OK) return st;
  if (lease->step_pending()) {
    return Fail(LLM_ERR_BUSY,
                "a step submitted with llm_session_prefill_async/decode_async is pending: "
                "collect it with llm_session_poll or llm_session_wait first");
  }
  return LLM_OK;
}

size_t LiveHandleCount() {
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.models.size() + r.sessions.size();
}

}  // namespace llm::api
