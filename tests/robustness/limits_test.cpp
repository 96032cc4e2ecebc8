// Limits before allocation (issue 4 part 2): model files whose headers claim
// absurd sizes (2^40 tensors or key/values, 10 GiB strings, 2^31-entry
// arrays, 2^40-element tensors, huge hyper-parameters) are rejected with
// LLM_ERR_BAD_MODEL and a message naming the problem, in under a second and
// with under 64 MiB of peak memory.
//
// Each load runs in a forked child, which resets its peak-RSS counter
// (/proc/self/clear_refs "5") and reports the VmHWM growth over its VmRSS at
// the start; outside sanitizer builds the child also caps its address space
// (RLIMIT_AS) at 64 MiB above its current size, so even an allocation that is
// never touched (and so never shows in RSS) fails the test with
// OUT_OF_MEMORY instead of BAD_MODEL.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// GGUF value types (gguf spec).
constexpr uint32_t kU32 = 4, kString = 8, kArray = 9, kU64 = 10;
constexpr uint32_t kF32Tensor = 0;

struct Bytes {
  std::vector<uint8_t> b;
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void Str(const std::string& s) {
    U64(s.size());
    Raw(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  void Header(uint64_t n_tensors, uint64_t n_kv) {
    U32(0x46554747);  // "GGUF"
    U32(3);
    U64(n_tensors);
    U64(n_kv);
  }
  void Pad(size_t n) { b.resize(b.size() + n, 0); }
};

long StatusKiB(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(f, line)) {
    if (line.compare(0, len, field) == 0) return std::atol(line.c_str() + len);
  }
  return -1;
}

struct ChildResult {
  llm_status status = -1;
  double ms = 0;
  long peak_delta_kib = 0;
  char message[512] = {0};
};

// Loads `data` in a forked child; returns what it saw.
ChildResult LoadInChild(const std::vector<uint8_t>& data) {
  ChildResult r;
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return r;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ChildResult c;
    {
      std::ofstream clear("/proc/self/clear_refs");
      clear << "5";  // reset VmHWM to the current RSS (Linux >= 4.0)
    }
    const long rss0 = StatusKiB("VmRSS:");
    const long hwm0 = StatusKiB("VmHWM:");
    const long base = hwm0 > rss0 ? hwm0 : rss0;  // if clear_refs was refused
    if (!kSanitized) {
      const long vm = StatusKiB("VmSize:");
      rlimit lim;
      lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(vm + 64 * 1024) * 1024;
      setrlimit(RLIMIT_AS, &lim);
    }
    llm_model* m = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    c.status = llm_model_load_from_memory(data.data(), data.size(), nullptr, &m);
    c.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    c.peak_delta_kib = StatusKiB("VmHWM:") - base;
    std::strncpy(c.message, llm_last_error(), sizeof c.message - 1);
    llm_model_free(m);
    const ssize_t w = write(fds[1], &c, sizeof c);
    _exit(w == static_cast<ssize_t>(sizeof c) ? 0 : 1);
  }
  close(fds[1]);
  size_t got = 0;
  while (got < sizeof r) {
    const ssize_t n = read(fds[0], reinterpret_cast<char*>(&r) + got, sizeof r - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
      << "the loading child crashed or was killed (status " << wstatus << ")";
  EXPECT_EQ(got, sizeof r);
  return r;
}

void ExpectRejectedCheaply(const std::vector<uint8_t>& data, const char* message_part) {
  const ChildResult r = LoadInChild(data);
  EXPECT_EQ(r.status, LLM_ERR_BAD_MODEL)
      << llm_status_string(r.status) << ": " << r.message;
  EXPECT_NE(std::string(r.message).find(message_part), std::string::npos)
      << "message should name the problem (\"" << message_part << "\"): " << r.message;
  EXPECT_LT(r.ms, 1000.0) << r.message;
  EXPECT_LT(r.peak_delta_kib, 64 * 1024) << "peak RSS grew by " << r.peak_delta_kib << " KiB";
}

TEST(LimitsTest, HugeTensorCountIsRejectedBeforeAllocating) {
  Bytes f;
  f.Header(uint64_t{1} << 40, 0);
  f.Pad(64);
  ExpectRejectedCheaply(f.b, "tensor count");
}

TEST(LimitsTest, HugeKeyValueCountIsRejectedBeforeAllocating) {
  Bytes f;
  f.Header(0, uint64_t{1} << 40);
  f.Pad(64);
  ExpectRejectedCheaply(f.b, "1099511627776");
}

TEST(LimitsTest, TenGibStringIsRejectedBeforeAllocating) {
  Bytes f;
  f.Header(0, 1);
  f.Str("general.name");
  f.U32(kString);
  f.U64(uint64_t{10} << 30);  // claims 10 GiB, the file has 32 bytes left
  f.Pad(32);
  ExpectRejectedCheaply(f.b, "general.name");
}

TEST(LimitsTest, HugeKeyLengthIsRejectedBeforeAllocating) {
  Bytes f;
  f.Header(0, 1);
  f.U64(uint64_t{1} << 62);
  f.Pad(32);
  ExpectRejectedCheaply(f.b, "key");
}

TEST(LimitsTest, TwoToThe31StringArrayIsRejectedBeforeAllocating) {
  Bytes f;
  f.Header(0, 1);
  f.Str("tokenizer.ggml.tokens");
  f.U32(kArray);
  f.U32(kString);
  f.U64(uint64_t{1} << 31);
  for (int i = 0; i < 8; ++i) f.Str("tok");
  ExpectRejectedCheaply(f.b, "tokenizer.ggml.tokens");
}

TEST(LimitsTest, TwoToThe40IntegerArrayIsRejectedBeforeAllocating) {
  Bytes f;
  f.Header(0, 1);
  f.Str("tokenizer.ggml.token_type");
  f.U32(kArray);
  f.U32(kU32);
  f.U64(uint64_t{1} << 40);
  f.Pad(64);
  ExpectRejectedCheaply(f.b, "tokenizer.ggml.token_type");
}

TEST(LimitsTest, TwoToThe40ElementTensorIsRejectedBeforeAllocating) {
  Bytes f;
  f.Header(1, 1);
  f.Str("general.alignment");
  f.U32(kU64);
  f.U64(32);
  f.Str("token_embd.weight");
  f.U32(2);
  f.U64(uint64_t{1} << 20);
  f.U64(uint64_t{1} << 20);
  f.U32(kF32Tensor);
  f.U64(0);
  while (f.b.size() % 32 != 0) f.b.push_back(0);
  f.Pad(4096);
  ExpectRejectedCheaply(f.b, "token_embd.weight");
}

TEST(LimitsTest, OverflowingTensorDimsAreRejected) {
  Bytes f;
  f.Header(1, 0);
  f.Str("t");
  f.U32(4);
  for (int i = 0; i < 4; ++i) f.U64(uint64_t{1} << 20);  // 2^80 elements
  f.U32(kF32Tensor);
  f.U64(0);
  while (f.b.size() % 32 != 0) f.b.push_back(0);
  f.Pad(64);
  ExpectRejectedCheaply(f.b, "'t'");
}

// The committed tiny model with its hyper-parameters patched to absurd values:
// rejected against the tensors actually present, before any buffer is sized
// from them.
std::vector<uint8_t> TinyWith(const std::string& key, uint32_t value) {
  std::ifstream in(std::string(LLM_TEST_DATA_DIR) + "/tiny/tiny-llama-Q8_0.gguf",
                   std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(b.size(), 1000u);
  // Key layout: u64 length, bytes, u32 type (UINT32), u32 value.
  const std::string needle = key;
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  EXPECT_NE(it, b.end()) << key;
  if (it == b.end()) return b;
  const size_t at = static_cast<size_t>(it - b.begin()) + needle.size();
  uint32_t type = 0;
  std::memcpy(&type, &b[at], 4);
  EXPECT_EQ(type, kU32) << key;
  std::memcpy(&b[at + 4], &value, 4);
  return b;
}

TEST(LimitsTest, AbsurdHyperParametersAreRejectedAgainstTheTensors) {
  ExpectRejectedCheaply(TinyWith("llama.vocab_size", 1u << 24), "vocabulary");
  ExpectRejectedCheaply(TinyWith("llama.block_count", 1024), "blk.2");
  ExpectRejectedCheaply(TinyWith("llama.embedding_length", 1u << 20), "token_embd.weight");
  ExpectRejectedCheaply(TinyWith("llama.block_count", 0xFFFFFFFFu), "block_count");
}

}  // namespace
