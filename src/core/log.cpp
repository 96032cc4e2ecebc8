#include "core/log.h"

#include <atomic>
#include <mutex>

namespace llm {
namespace {

struct Sink {
  std::mutex mutex;
  llm_log_fn fn = nullptr;
  void* user = nullptr;
  std::atomic<int32_t> min_level{LLM_LOG_ERROR + 1};  // nothing enabled without a sink
};

Sink& GlobalSink() {
  static Sink* sink = new Sink();  // never destroyed: logging may happen during exit
  return *sink;
}

}  // namespace

void SetLogSink(llm_log_fn fn, void* user, int32_t min_level) {
  Sink& sink = GlobalSink();
  std::lock_guard<std::mutex> lock(sink.mutex);
  sink.fn = fn;
  sink.user = user;
  sink.min_level = fn == nullptr ? LLM_LOG_ERROR + 1 : min_level;
}

bool LogEnabled(int32_t level) { return level >= GlobalSink().min_level.load(); }

void LogMessage(int32_t level, const std::string& message) {
  Sink& sink = GlobalSink();
  std::lock_guard<std::mutex> lock(sink.mutex);
  if (sink.fn != nullptr && level >= sink.min_level) sink.fn(level, message.c_str(), sink.user);
}

}  // namespace llm
