// Allocation-failure injection for the OOM tests (tests/robustness/
// oom_sweep.cpp, its own executable: the hook replaces the global allocation
// functions for the whole process).
//
// Armed with N, the N-th allocation (1-based) made on the arming thread fails:
// operator new / new[] (all overloads, aligned ones included) throw
// std::bad_alloc (nothrow forms return nullptr), and, outside ASan builds,
// malloc / calloc / realloc / posix_memalign / aligned_alloc / memalign return
// nullptr with errno = ENOMEM. Only allocations of the arming thread count, so
// a sweep is deterministic; worker threads (the session's pool, OpenMP) are
// not injected.
#pragma once

#include <cstdint>

namespace llm_oom {

// Starts counting on the calling thread; allocation number `fail_at` (>= 1)
// fails. fail_at = 0 counts without failing.
void Arm(int64_t fail_at);
// Stops counting; returns the number of allocations seen since Arm.
int64_t Disarm();
// Whether the armed failure has happened since Arm.
bool Injected();
// Whether malloc and friends are hooked too (false under ASan, whose
// allocator cannot be replaced).
bool HooksMalloc();

}  // namespace llm_oom
