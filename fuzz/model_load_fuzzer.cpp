// Model::LoadMemory on arbitrary bytes with vocab_only = false: the whole
// loader (GGUF parse, llama hyper-parameters, tokenizer, weight binding with
// every tensor's type and shape checked, norm conversion, the prefault pass).
// Run with -rss_limit_mb=2048 -malloc_limit_mb=512: the loader must never
// allocate from a count the file does not back. On success the loaded model
// is used a little (tokenize/detokenize) so that a model accepted by the
// loader but inconsistent inside shows up.
//
// LLM_FUZZ_VERBOSE=1 prints the load status of each input (for checking seeds).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "engine/model.h"
#include "fuzz/fuzz_util.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool verbose = std::getenv("LLM_FUZZ_VERBOSE") != nullptr;
  llm::ModelLoadOptions options;
  options.vocab_only = false;
  options.n_threads = 1;
  auto model = llm::Model::LoadMemory(data, size, options);
  if (verbose) {
    std::fprintf(stderr, "load: %s\n", model.ok() ? "OK" : std::string(model.status().message()).c_str());
  }
  if (!model.ok()) {
    LLM_FUZZ_CHECK(!model.status().message().empty());
    return 0;
  }
  const llm::Model& m = **model;
  LLM_FUZZ_CHECK(!m.vocab_only());
  LLM_FUZZ_CHECK(m.tokenizer().n_vocab() == m.hparams().n_vocab);
  auto ids = m.tokenizer().Tokenize("Hello, world! <s> 123", true, true);
  if (ids.ok()) {
    for (int32_t id : *ids) LLM_FUZZ_CHECK(id >= 0 && id < m.tokenizer().n_vocab());
    (void)m.tokenizer().Detokenize(*ids, true);
  }
  (void)m.n_params();
  (void)llm::DetectChatTemplateInfo(m.chat_template());
  return 0;
}
