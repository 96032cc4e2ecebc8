// Replaces the global allocation functions of the OOM test executable (see
// alloc_hook.h). malloc and friends forward to glibc's __libc_* entry points;
// under ASan only operator new/delete are replaced (forwarding to ASan's
// malloc, so leak checking still sees every block).
#include "alloc_hook.h"

#include <errno.h>
#include <stdlib.h>

#include <atomic>
#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LLM_OOM_HOOK_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LLM_OOM_HOOK_MALLOC 0
#endif
#endif
#ifndef LLM_OOM_HOOK_MALLOC
#define LLM_OOM_HOOK_MALLOC 1
#endif

namespace {

// Plain thread_local PODs and lock-free atomics: no allocation, no
// constructor, safe inside malloc.
thread_local bool t_armed = false;
thread_local int64_t t_count = 0;
thread_local int64_t t_fail_at = 0;
thread_local bool t_injected = false;
// Set while operator new calls malloc, so one `new` counts once.
thread_local bool t_inner = false;

// Process-wide mode (ArmAllThreads): every thread's allocations are counted
// in one sequence.
std::atomic<bool> g_all_armed{false};
std::atomic<int64_t> g_count{0};
std::atomic<int64_t> g_fail_at{0};
std::atomic<bool> g_injected{false};
std::atomic<bool> g_injected_elsewhere{false};  // on a thread other than the armer
thread_local bool t_is_armer = false;

// True when this allocation must fail.
inline bool ShouldFail() {
  if (t_inner) return false;
  if (g_all_armed.load(std::memory_order_acquire)) {
    const int64_t c = g_count.fetch_add(1, std::memory_order_acq_rel) + 1;
    const int64_t at = g_fail_at.load(std::memory_order_relaxed);
    if (at > 0 && c == at) {
      g_injected_elsewhere.store(!t_is_armer, std::memory_order_relaxed);
      g_injected.store(true, std::memory_order_release);
      return true;
    }
    return false;
  }
  if (!t_armed) return false;
  ++t_count;
  if (t_fail_at > 0 && t_count == t_fail_at) {
    t_injected = true;
    return true;
  }
  return false;
}

}  // namespace

#if LLM_OOM_HOOK_MALLOC
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) {
  if (ShouldFail()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  if (ShouldFail()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  if (ShouldFail()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(size_t align, size_t n) {
  if (ShouldFail()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  if (ShouldFail()) return ENOMEM;
  void* p = __libc_memalign(align, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(size_t n) { return memalign(4096, n); }
void* pvalloc(size_t n) { return memalign(4096, (n + 4095) & ~size_t{4095}); }
}  // extern "C"
#endif

namespace {

void* NewImpl(size_t n) {
  if (ShouldFail()) throw std::bad_alloc();
  // With the malloc hook, operator new counts once (the inner malloc call
  // is not counted).
  t_inner = true;
  void* p = std::malloc(n == 0 ? 1 : n);
  t_inner = false;
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* NewAlignedImpl(size_t n, std::align_val_t al) {
  if (ShouldFail()) throw std::bad_alloc();
  t_inner = true;
  size_t align = static_cast<size_t>(al);
  if (align < sizeof(void*)) align = sizeof(void*);
  void* p = nullptr;
  const int rc = posix_memalign(&p, align, n == 0 ? 1 : n);
  t_inner = false;
  if (rc != 0 || p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t n) { return NewImpl(n); }
void* operator new[](size_t n) { return NewImpl(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return NewImpl(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return NewImpl(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(size_t n, std::align_val_t al) { return NewAlignedImpl(n, al); }
void* operator new[](size_t n, std::align_val_t al) { return NewAlignedImpl(n, al); }
void* operator new(size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return NewAlignedImpl(n, al);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return NewAlignedImpl(n, al);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace llm_oom {

void Arm(int64_t fail_at) {
  t_count = 0;
  t_fail_at = fail_at;
  t_injected = false;
  g_injected.store(false);
  t_armed = true;
}

void ArmAllThreads(int64_t fail_at) {
  t_injected = false;
  g_count.store(0);
  g_fail_at.store(fail_at);
  g_injected.store(false);
  g_injected_elsewhere.store(false);
  t_is_armer = true;
  g_all_armed.store(true, std::memory_order_release);
}

int64_t Disarm() {
  if (g_all_armed.exchange(false, std::memory_order_acq_rel)) return g_count.load();
  t_armed = false;
  return t_count;
}

bool InjectedOnAnotherThread() { return g_injected_elsewhere.load(std::memory_order_acquire); }

bool Injected() { return t_injected || g_injected.load(std::memory_order_acquire); }

bool HooksMalloc() { return LLM_OOM_HOOK_MALLOC != 0; }

}  // namespace llm_oom
