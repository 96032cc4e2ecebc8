// Allocation-failure injection for the OOM tests (tests/robustness/
// oom_sweep.cpp, its own executable: the hook replaces the global allocation
// functions for the whole process).
//
// Armed with N, the N-th allocation (1-based) made on the arming thread fails:
// operator new / new[] (all overloads, aligned ones included) throw
// std::bad_alloc (nothrow forms return nullptr), and, outside ASan builds,
// malloc / calloc / realloc / posix_memalign / aligned_alloc / memalign return
// nullptr with errno = ENOMEM.
//
// Two modes:
//  - Arm(N): only allocations of the arming thread count.
//  - ArmAllThreads(N): allocations of every thread of the process count, in
//    one sequence. Since 0.2 forward passes run on the model's scheduler
//    thread (src/engine/scheduler.cpp), not on the caller's, so this is the
//    mode that reaches them. It is deterministic as long as only one thread
//    allocates at a time, which holds for the OOM sweep: model n_threads = 1
//    (no pool workers), OMP_NUM_THREADS=1, one session driven at a time, and
//    the caller blocks in the call (or polls, which does not allocate) while
//    the scheduler thread runs the step; the scheduler allocates nothing after
//    it ends a step. A sweep is still correct if an interleaving shifts the
//    count (each N then checks some allocation point); it only loses
//    reproducibility of that N.
#pragma once

#include <cstdint>

namespace llm_oom {

// Starts counting on the calling thread; allocation number `fail_at` (>= 1)
// fails. fail_at = 0 counts without failing.
void Arm(int64_t fail_at);
// Starts counting allocations of all threads (see above).
void ArmAllThreads(int64_t fail_at);
// Stops counting (either mode); returns the number of allocations seen since
// Arm / ArmAllThreads.
int64_t Disarm();
// Whether the armed failure has happened since Arm / ArmAllThreads.
bool Injected();
// ArmAllThreads mode: whether the injected failure hit a thread other than
// the one that armed the hook (e.g. the scheduler thread).
bool InjectedOnAnotherThread();
// Whether malloc and friends are hooked too (false under ASan, whose
// allocator cannot be replaced).
bool HooksMalloc();

}  // namespace llm_oom
