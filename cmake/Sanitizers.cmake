# Sanitizer builds of the whole tree (every target: engine, libllm.so, tests,
# tools), chosen with the cache variable LLM_SANITIZE declared in the root
# CMakeLists.txt:
#   LLM_SANITIZE=address,undefined   ASan + UBSan (LeakSanitizer included);
#                                    UB aborts the test (no recovery), so CI
#                                    fails on the first report.
#   LLM_SANITIZE=thread              TSan, for the concurrency tests.
#   LLM_SANITIZE=""                  (default) none.
# scripts/test_sanitizers.sh drives both; SECURITY.md says what runs where.
if(NOT LLM_SANITIZE)
  return()
endif()

if(LLM_SANITIZE STREQUAL "address,undefined" OR LLM_SANITIZE STREQUAL "undefined,address")
  # -fno-omit-frame-pointer: readable stacks in reports at little cost.
  set(LLM_SANITIZER_FLAGS
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
elseif(LLM_SANITIZE STREQUAL "address")
  set(LLM_SANITIZER_FLAGS -fsanitize=address -fno-omit-frame-pointer)
elseif(LLM_SANITIZE STREQUAL "thread")
  set(LLM_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
else()
  message(FATAL_ERROR
    "LLM_SANITIZE='${LLM_SANITIZE}': use 'address,undefined', 'thread' or '' (none)")
endif()

message(STATUS "Sanitizers: ${LLM_SANITIZER_FLAGS}")
add_compile_options(${LLM_SANITIZER_FLAGS})
add_link_options(${LLM_SANITIZER_FLAGS})
# Tell the code it runs sanitized (tests scale their work down, the OOM hook
# test steps aside under ASan's own allocator where needed).
add_compile_definitions(LLM_SANITIZE_BUILD=1)
# libllm.so links with -Wl,--no-undefined; the sanitizer runtimes are linked
# into the executables, not the shared object, unless told otherwise. GCC and
# Clang both link the shared runtime into shared objects with -fsanitize=, so
# nothing more is needed here.
