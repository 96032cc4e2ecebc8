// Struct sizes across ABI versions (docs/ABI.md, "Struct sizes"), through the
// public C ABI only: every llm_*_init_v and getter writes exactly struct_size
// bytes; the unsized llm_*_init symbols write the size their struct had when
// they were published; a larger struct_size (a newer header) is accepted
// when the bytes this library does not know are zero, and refused with the
// offset of the first non-zero one otherwise; getters zero those bytes; sizes
// below the first published one, between published ones, or absurdly large
// are refused. tests/abi/compat/ runs old binaries against the library.
//
// Every struct lives in a byte buffer filled with a pattern and followed by
// guard bytes, so a write past struct_size is seen.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

constexpr unsigned char kFill = 0xA5;
constexpr size_t kGuard = 64;
constexpr size_t kTooLarge = 4097;  // above the library's 4096-byte cap

// The size llm_model_params / llm_session_params had in 0.1 (the offset of
// the first field appended later); llm_kv_stats grew in 0.3 (below); every other
// struct still has its first size.
constexpr size_t kModelParams01 = offsetof(llm_model_params, kv_budget_bytes);
constexpr size_t kModelParams02 = offsetof(llm_model_params, device);
// 0.3's device took the tail padding of the 0.1 struct (224 bytes).
constexpr size_t kModelInfo01 = offsetof(llm_model_info, device_index);
constexpr size_t kSessionParams01 = offsetof(llm_session_params, sampler_ext);
// 0.3 appended the second (sliding-window) pool's fields.
constexpr size_t kKvStats02 = offsetof(llm_kv_stats, n_pools);

// A struct of `size` bytes followed by kGuard guard bytes, all kFill at first.
class Buffer {
 public:
  explicit Buffer(size_t size) : size_(size), bytes_(size + kGuard + 16, kFill) {}
  template <typename T>
  T *as() {
    return reinterpret_cast<T *>(data());
  }
  unsigned char *data() {
    // 16-byte aligned, whatever the vector's own alignment.
    const uintptr_t p = reinterpret_cast<uintptr_t>(bytes_.data());
    return bytes_.data() + ((16 - p % 16) % 16);
  }
  uint32_t struct_size() {
    uint32_t s;
    std::memcpy(&s, data(), sizeof s);
    return s;
  }
  // Bytes [from, to) all equal `value`.
  bool all(size_t from, size_t to, unsigned char value) {
    for (size_t i = from; i < to; ++i)
      if (data()[i] != value) return false;
    return true;
  }
  bool guard_intact() { return all(size_, size_ + kGuard, kFill); }
  void fill(size_t from, size_t to, unsigned char value) {
    std::memset(data() + from, value, to - from);
  }

 private:
  size_t size_;
  std::vector<unsigned char> bytes_;
};

::testing::AssertionResult Fails(llm_status got, llm_status want,
                                 std::vector<std::string> mentions) {
  const std::string msg = llm_last_error();
  if (got != want) {
    return ::testing::AssertionFailure() << "returned " << llm_status_string(got) << " (" << msg
                                         << "), expected " << llm_status_string(want);
  }
  for (const std::string &m : mentions) {
    if (msg.find(m) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << m << "\"";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Ok(llm_status got) {
  if (got == LLM_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << llm_status_string(got) << ": " << llm_last_error();
}

// ---- inits ---------------------------------------------------------------

// One llm_x_init_v, its sizes (published ones, oldest first) and its unsized
// symbol with the size that symbol must write.
template <typename T>
struct InitCase {
  const char *name;
  llm_status (*init_v)(T *, size_t);
  llm_status (*init_unsized)(T *);  // nullptr: none (new in 0.3)
  std::vector<size_t> published;
};

template <typename T>
void CheckInit(const InitCase<T> &c) {
  SCOPED_TRACE(c.name);
  std::vector<size_t> good = c.published;
  good.push_back(sizeof(T) + 8);  // a newer header's struct
  good.push_back(4096);
  for (size_t size : good) {
    SCOPED_TRACE("struct_size " + std::to_string(size));
    Buffer b(size);
    ASSERT_TRUE(Ok(c.init_v(b.as<T>(), size)));
    EXPECT_EQ(b.struct_size(), size);
    EXPECT_TRUE(b.guard_intact()) << "wrote past struct_size";
    if (size > sizeof(T)) {
      EXPECT_TRUE(b.all(sizeof(T), size, 0)) << "unknown tail not zeroed";
    }
  }
  std::vector<size_t> bad = {0, 1, 3, c.published[0] - 1, kTooLarge, SIZE_MAX};
  for (size_t i = 0; i + 1 < c.published.size(); ++i) bad.push_back(c.published[i] + 4);
  for (size_t size : bad) {
    SCOPED_TRACE("struct_size " + std::to_string(size));
    Buffer b(sizeof(T));
    EXPECT_TRUE(Fails(c.init_v(b.as<T>(), size), LLM_ERR_INVALID_ARGUMENT, {"struct_size"}));
    EXPECT_TRUE(b.all(0, sizeof(T) + kGuard, kFill)) << "written on failure";
  }
  if (c.init_unsized != nullptr) {
    // What an old binary gets: the first published size, never more.
    Buffer b(c.published[0]);
    ASSERT_TRUE(Ok(c.init_unsized(b.as<T>())));
    EXPECT_EQ(b.struct_size(), c.published[0]);
    EXPECT_TRUE(b.guard_intact()) << "the unsized init wrote past its first published size";
  }
}

TEST(AbiStructSize, InitsWriteExactlyTheirSize) {
  // The unsized names are macros in llm.h; parentheses reach the functions
  // that binaries built against older headers call.
  CheckInit<llm_model_params>({"llm_model_params",
                               llm_model_params_init_v,
                               (llm_model_params_init),
                               {kModelParams01, kModelParams02, sizeof(llm_model_params)}});
  CheckInit<llm_model_info>({"llm_model_info",
                             llm_model_info_init_v,
                             (llm_model_info_init),
                             {kModelInfo01, sizeof(llm_model_info)}});
  CheckInit<llm_kv_stats>(
      {"llm_kv_stats", llm_kv_stats_init_v, (llm_kv_stats_init), {kKvStats02, sizeof(llm_kv_stats)}});
  CheckInit<llm_batch_stats>({"llm_batch_stats",
                              llm_batch_stats_init_v,
                              (llm_batch_stats_init),
                              {sizeof(llm_batch_stats)}});
  CheckInit<llm_sampler_params>({"llm_sampler_params",
                                 llm_sampler_params_init_v,
                                 (llm_sampler_params_init),
                                 {sizeof(llm_sampler_params)}});
  CheckInit<llm_sampler_ext>(
      {"llm_sampler_ext", llm_sampler_ext_init_v, nullptr, {sizeof(llm_sampler_ext)}});
  CheckInit<llm_chat_options>(
      {"llm_chat_options", llm_chat_options_init_v, nullptr, {sizeof(llm_chat_options)}});
  CheckInit<llm_session_params>({"llm_session_params",
                                 llm_session_params_init_v,
                                 (llm_session_params_init),
                                 {kSessionParams01, sizeof(llm_session_params)}});
  CheckInit<llm_session_stats>({"llm_session_stats",
                                llm_session_stats_init_v,
                                (llm_session_stats_init),
                                {sizeof(llm_session_stats)}});
  CheckInit<llm_generate_params>({"llm_generate_params",
                                  llm_generate_params_init_v,
                                  (llm_generate_params_init),
                                  {sizeof(llm_generate_params)}});
  CheckInit<llm_generate_result>({"llm_generate_result",
                                  llm_generate_result_init_v,
                                  (llm_generate_result_init),
                                  {sizeof(llm_generate_result)}});
}

TEST(AbiStructSize, InitMacrosPassTheHeadersSize) {
  Buffer b(sizeof(llm_model_params));
  ASSERT_TRUE(Ok(llm_model_params_init(b.as<llm_model_params>())));
  EXPECT_EQ(b.struct_size(), sizeof(llm_model_params));
  EXPECT_EQ(b.as<llm_model_params>()->batch_tokens, 0);
  EXPECT_TRUE(b.guard_intact());
  Buffer s(sizeof(llm_session_params));
  ASSERT_TRUE(Ok(llm_session_params_init(s.as<llm_session_params>())));
  EXPECT_EQ(s.struct_size(), sizeof(llm_session_params));
  EXPECT_EQ(s.as<llm_session_params>()->sampler_ext, nullptr);
  EXPECT_EQ(s.as<llm_session_params>()->sampler.struct_size, sizeof(llm_sampler_params));
  EXPECT_TRUE(s.guard_intact());
}

// ---- with the tiny model -------------------------------------------------

class AbiStructSizeTiny : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = llm_abi_test::TinyModelPath("Q8_0");
    LLM_ABI_REQUIRE_FILE(path_);
    ASSERT_TRUE(Ok(llm_model_load(path_.c_str(), nullptr, &model_)));
  }
  void TearDown() override { llm_model_free(model_); }

  llm_session *NewSession() {
    llm_session_params p;
    llm_session_params_init(&p);
    p.n_ctx = 64;
    p.sampler.temperature = 0.0f;
    llm_session *s = nullptr;
    EXPECT_TRUE(Ok(llm_session_create(model_, &p, &s)));
    return s;
  }
  std::vector<llm_token> Prompt() {
    std::vector<llm_token> t(16);
    size_t n = 0;
    EXPECT_TRUE(Ok(llm_tokenize(model_, "hello", 5, 1, 0, t.data(), t.size(), &n)));
    t.resize(n);
    return t;
  }

  std::string path_;
  llm_model *model_ = nullptr;
};

// A caller's struct `extra` bytes larger than this library's T, filled by
// init_v with struct_size = sizeof(T) + extra.
template <typename T>
struct Wider {
  explicit Wider(llm_status (*init_v)(T *, size_t), size_t extra = 16)
      : size(sizeof(T) + extra), buf(size) {
    EXPECT_TRUE(Ok(init_v(buf.as<T>(), size)));
  }
  T *get() { return buf.as<T>(); }
  void set_unknown_byte(size_t offset_past_end) { buf.data()[sizeof(T) + offset_past_end] = 1; }
  std::string offset_of(size_t offset_past_end) const {
    return "offset " + std::to_string(sizeof(T) + offset_past_end);
  }
  size_t size;
  Buffer buf;
};

TEST_F(AbiStructSizeTiny, LargerModelParams) {
  Wider<llm_model_params> p(llm_model_params_init_v);
  p.get()->n_threads = 1;
  llm_model *m = nullptr;
  ASSERT_TRUE(Ok(llm_model_load(path_.c_str(), p.get(), &m))) << "zero unknown bytes";
  llm_model_free(m);
  p.set_unknown_byte(5);
  m = nullptr;
  EXPECT_TRUE(Fails(llm_model_load(path_.c_str(), p.get(), &m), LLM_ERR_INVALID_ARGUMENT,
                    {"params", p.offset_of(5)}));
  EXPECT_EQ(m, nullptr);
}

TEST_F(AbiStructSizeTiny, OlderModelParamsFieldsAreNotRead) {
  // A 0.1 caller: struct_size 32, and whatever lies beyond is not its own.
  Buffer b(sizeof(llm_model_params));
  ASSERT_TRUE(Ok((llm_model_params_init)(b.as<llm_model_params>())));
  EXPECT_EQ(b.struct_size(), kModelParams01);
  b.as<llm_model_params>()->batch_tokens = -5;  // refused if it were read
  b.as<llm_model_params>()->deterministic = 7;
  llm_model *m = nullptr;
  ASSERT_TRUE(Ok(llm_model_load(path_.c_str(), b.as<llm_model_params>(), &m)));
  llm_model_free(m);
  // Between the two published sizes: not a size llm_model_params ever had.
  b.as<llm_model_params>()->struct_size = kModelParams01 + 8;
  m = nullptr;
  EXPECT_TRUE(Fails(llm_model_load(path_.c_str(), b.as<llm_model_params>(), &m),
                    LLM_ERR_INVALID_ARGUMENT, {"struct_size"}));
  b.as<llm_model_params>()->struct_size = kTooLarge;
  EXPECT_TRUE(Fails(llm_model_load(path_.c_str(), b.as<llm_model_params>(), &m),
                    LLM_ERR_INVALID_ARGUMENT, {"struct_size"}));
  EXPECT_EQ(m, nullptr);
}

TEST_F(AbiStructSizeTiny, SessionParamsSizesAndSamplerExt) {
  // 0.1 size, in an allocation of exactly that size (ASan sees an over-read);
  // the 0.3 field would be garbage if it were read.
  {
    std::vector<unsigned char> exact(kSessionParams01);
    ASSERT_TRUE(
        Ok((llm_session_params_init)(reinterpret_cast<llm_session_params *>(exact.data()))));
    llm_session_params *p = reinterpret_cast<llm_session_params *>(exact.data());
    EXPECT_EQ(p->struct_size, kSessionParams01);
    llm_session *s = nullptr;
    ASSERT_TRUE(Ok(llm_session_create(model_, p, &s)));
    llm_session_free(s);
  }
  // Larger, zero tail: accepted; a non-zero unknown byte: refused.
  Wider<llm_session_params> p(llm_session_params_init_v);
  llm_session *s = nullptr;
  ASSERT_TRUE(Ok(llm_session_create(model_, p.get(), &s)));
  llm_session_free(s);
  p.set_unknown_byte(3);
  s = nullptr;
  EXPECT_TRUE(Fails(llm_session_create(model_, p.get(), &s), LLM_ERR_INVALID_ARGUMENT,
                    {"params", p.offset_of(3)}));
  EXPECT_EQ(s, nullptr);

  // The extension: its own sizes, zero-tail rule and reserved field.
  llm_session_params sp;
  ASSERT_TRUE(Ok(llm_session_params_init(&sp)));
  Wider<llm_sampler_ext> ext(llm_sampler_ext_init_v);
  sp.sampler_ext = ext.get();
  ASSERT_TRUE(Ok(llm_session_create(model_, &sp, &s)));
  llm_session_free(s);
  ext.set_unknown_byte(0);
  s = nullptr;
  EXPECT_TRUE(Fails(llm_session_create(model_, &sp, &s), LLM_ERR_INVALID_ARGUMENT,
                    {"sampler_ext", ext.offset_of(0)}));
  llm_sampler_ext e;
  ASSERT_TRUE(Ok(llm_sampler_ext_init(&e)));
  e.reserved0 = 1;
  sp.sampler_ext = &e;
  EXPECT_TRUE(Fails(llm_session_create(model_, &sp, &s), LLM_ERR_INVALID_ARGUMENT, {"reserved0"}));
  e.reserved0 = 0;
  e.struct_size = 4;
  EXPECT_TRUE(Fails(llm_session_create(model_, &sp, &s), LLM_ERR_INVALID_ARGUMENT,
                    {"sampler_ext", "struct_size"}));
  // The embedded sampler is frozen: no other size.
  sp.sampler_ext = nullptr;
  sp.sampler.struct_size = sizeof(llm_sampler_params) + 8;
  EXPECT_TRUE(Fails(llm_session_create(model_, &sp, &s), LLM_ERR_INVALID_ARGUMENT,
                    {"sampler.struct_size"}));
  EXPECT_EQ(s, nullptr);
}

TEST_F(AbiStructSizeTiny, LargerSamplerAndGenerateParams) {
  llm_session *s = NewSession();
  ASSERT_NE(s, nullptr);
  Wider<llm_sampler_params> sp(llm_sampler_params_init_v);
  sp.get()->temperature = 0.0f;
  EXPECT_TRUE(Ok(llm_session_set_sampler(s, sp.get())));
  sp.set_unknown_byte(15);
  EXPECT_TRUE(Fails(llm_session_set_sampler(s, sp.get()), LLM_ERR_INVALID_ARGUMENT,
                    {"params", sp.offset_of(15)}));

  const std::vector<llm_token> prompt = Prompt();
  Wider<llm_generate_params> gp(llm_generate_params_init_v);
  gp.get()->max_tokens = 2;
  llm_generate_result gr;
  ASSERT_TRUE(Ok(llm_generate_result_init(&gr)));
  EXPECT_TRUE(Ok(llm_generate(s, prompt.data(), prompt.size(), gp.get(), &gr)));
  EXPECT_GE(gr.n_generated, 1);
  ASSERT_TRUE(Ok(llm_session_reset(s)));
  gp.set_unknown_byte(8);
  EXPECT_TRUE(Fails(llm_generate(s, prompt.data(), prompt.size(), gp.get(), &gr),
                    LLM_ERR_INVALID_ARGUMENT, {"params", gp.offset_of(8)}));
  size_t n = 1;
  EXPECT_TRUE(Ok(llm_session_n_tokens(s, &n)));
  EXPECT_EQ(n, 0u) << "a refused generate ran";
  llm_session_free(s);
}

// A getter given a larger struct writes struct_size bytes: its own fields,
// zeros for the rest; struct_size stays the caller's. Too small or too large
// a size is refused and nothing is written.
template <typename T, typename Get>
void CheckGetter(const char *name, llm_status (*init_v)(T *, size_t), Get get) {
  SCOPED_TRACE(name);
  const size_t size = sizeof(T) + 24;
  Buffer b(size);
  ASSERT_TRUE(Ok(init_v(b.as<T>(), size)));
  b.fill(sizeof(T), size, kFill);  // what a caller's newer field might hold
  ASSERT_TRUE(Ok(get(b.as<T>())));
  EXPECT_EQ(b.struct_size(), size);
  EXPECT_TRUE(b.all(sizeof(T), size, 0)) << "the unknown tail was not zeroed";
  EXPECT_TRUE(b.guard_intact()) << "wrote past struct_size";
  for (size_t bad : {size_t{0}, sizeof(T) - 4, kTooLarge}) {
    SCOPED_TRACE("struct_size " + std::to_string(bad));
    Buffer f(sizeof(T));
    const uint32_t s32 = static_cast<uint32_t>(bad);
    std::memcpy(f.data(), &s32, sizeof s32);
    EXPECT_TRUE(Fails(get(f.as<T>()), LLM_ERR_INVALID_ARGUMENT, {"struct_size"}));
    EXPECT_TRUE(f.all(sizeof s32, sizeof(T) + kGuard, kFill)) << "written on failure";
  }
}

TEST_F(AbiStructSizeTiny, GettersZeroTheTailOfALargerStruct) {
  llm_session *s = NewSession();
  ASSERT_NE(s, nullptr);
  const std::vector<llm_token> prompt = Prompt();
  CheckGetter<llm_model_info>("llm_model_get_info", llm_model_info_init_v,
                              [&](llm_model_info *i) { return llm_model_get_info(model_, i); });
  CheckGetter<llm_kv_stats>("llm_model_kv_stats", llm_kv_stats_init_v,
                            [&](llm_kv_stats *k) { return llm_model_kv_stats(model_, k); });
  CheckGetter<llm_batch_stats>(
      "llm_model_batch_stats", llm_batch_stats_init_v,
      [&](llm_batch_stats *b) { return llm_model_batch_stats(model_, b); });
  CheckGetter<llm_session_stats>("llm_session_get_stats", llm_session_stats_init_v,
                                 [&](llm_session_stats *t) { return llm_session_get_stats(s, t); });
  llm_generate_params gp;
  ASSERT_TRUE(Ok(llm_generate_params_init(&gp)));
  gp.max_tokens = 1;
  CheckGetter<llm_generate_result>("llm_generate", llm_generate_result_init_v,
                                   [&](llm_generate_result *r) {
                                     llm_session_reset(s);
                                     return llm_generate(s, prompt.data(), prompt.size(), &gp, r);
                                   });
  // The values are there too.
  Buffer b(sizeof(llm_model_info) + 8);
  ASSERT_TRUE(Ok(llm_model_info_init_v(b.as<llm_model_info>(), sizeof(llm_model_info) + 8)));
  ASSERT_TRUE(Ok(llm_model_get_info(model_, b.as<llm_model_info>())));
  EXPECT_GT(b.as<llm_model_info>()->n_vocab, 0);
  EXPECT_STREQ(b.as<llm_model_info>()->architecture, "llama");
  llm_session_free(s);
}

// ---- chat messages -------------------------------------------------------

TEST(AbiStructSizeChat, MessageSizeIsTheArrayStride) {
  const llm_chat_message plain[2] = {{"system", "be brief"}, {"user", "hi"}};
  char want[512];
  size_t want_len = 0;
  ASSERT_TRUE(Ok(llm_chat_format(nullptr, "chatml", plain, 2, 1, want, sizeof want, &want_len)));
  // The 0.1 symbol reads 16-byte elements too.
  char got[512];
  size_t len = 0;
  ASSERT_TRUE(Ok((llm_chat_format)(nullptr, "chatml", plain, 2, 1, got, sizeof got, &len)));
  EXPECT_EQ(std::string(got, len), std::string(want, want_len));

  // A newer header's element: one more field after ours.
  struct Wide {
    llm_chat_message m;
    const char *name;
  };
  Wide wide[2] = {{{"system", "be brief"}, nullptr}, {{"user", "hi"}, nullptr}};
  ASSERT_TRUE(Ok(
      llm_chat_format_v(nullptr, "chatml", &wide[0].m, 2, sizeof(Wide), 1, got, sizeof got, &len)));
  EXPECT_EQ(std::string(got, len), std::string(want, want_len));
  wide[1].name = "bob";
  EXPECT_TRUE(Fails(
      llm_chat_format_v(nullptr, "chatml", &wide[0].m, 2, sizeof(Wide), 1, got, sizeof got, &len),
      LLM_ERR_INVALID_ARGUMENT,
      {"messages[1]", "offset " + std::to_string(sizeof(llm_chat_message))}));
  for (size_t bad : {size_t{0}, sizeof(llm_chat_message) - 8, kTooLarge}) {
    SCOPED_TRACE("message_size " + std::to_string(bad));
    EXPECT_TRUE(Fails(llm_chat_format_v(nullptr, "chatml", plain, 2, bad, 1, got, sizeof got, &len),
                      LLM_ERR_INVALID_ARGUMENT, {"message_size"}));
  }
}

}  // namespace
