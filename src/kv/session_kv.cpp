#include "kv/session_kv.h"

#include <algorithm>

#include "core/status.h"

namespace llm {

SessionKv::SessionKv(const KvGroups* groups, absl::Span<KvBlockPool* const> pools, KvType type,
                     int64_t n_ctx, uint32_t variant)
    : groups_(groups) {
  tables_.reserve(groups->size());
  for (size_t g = 0; g < groups->size(); ++g) {
    tables_.push_back(
        std::make_unique<KvBlockTable>(pools[g], type, n_ctx, groups->groups[g].window, variant));
  }
}

int64_t SessionKv::window() const {
  int64_t w = 0;
  for (const auto& t : tables_) w = std::max(w, t->window());
  return w;
}

int64_t SessionKv::blocks_held() const {
  int64_t n = 0;
  for (const auto& t : tables_) n += t->blocks_held();
  return n;
}

void SessionKv::SetPin(int64_t pin) {
  for (const auto& t : tables_) t->SetPin(pin);
}

bool SessionKv::CanResumeAt(int64_t n) const {
  for (const auto& t : tables_) {
    if (!t->CanResumeAt(n)) return false;
  }
  return true;
}

absl::Status SessionKv::PrepareWrite(int64_t begin, int64_t end) {
  for (const auto& t : tables_) LLM_RETURN_IF_ERROR(t->PrepareWrite(begin, end));
  return absl::OkStatus();
}

void SessionKv::Commit(absl::Span<const int32_t> tokens) {
  for (const auto& t : tables_) t->Commit(tokens);
}

int64_t SessionKv::AdoptCachedPrefix(absl::Span<const int32_t> history, int64_t max_positions) {
  const int64_t start = n_positions();
  int64_t n = max_positions;
  for (const auto& t : tables_) n = t->AdoptCachedPrefix(history, n);
  // n is now the least any table adopted (each adopted at most up to the
  // previous one's count): bring the others back to it.
  n = std::min(n, max_positions);
  for (const auto& t : tables_) {
    if (t->n_positions() > n && !t->CanResumeAt(n)) n = start;
  }
  for (const auto& t : tables_) {
    if (t->n_positions() > n) t->Truncate(n);
  }
  return n_positions();
}

void SessionKv::Truncate(int64_t n) {
  for (const auto& t : tables_) t->Truncate(n);
}

absl::Status SessionKv::PrepareRestore(int64_t n) {
  for (size_t g = 0; g < tables_.size(); ++g) {
    if (absl::Status st = tables_[g]->PrepareRestore(n); !st.ok()) {
      for (size_t h = 0; h < g; ++h) tables_[h]->Truncate(0);
      return st;
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<SessionKv> SessionKv::Fork() const {
  std::unique_ptr<SessionKv> child(new SessionKv(groups_));
  child->tables_.reserve(tables_.size());  // the push_backs below cannot throw
  for (const auto& t : tables_) child->tables_.push_back(t->Fork());
  return child;
}

}  // namespace llm
