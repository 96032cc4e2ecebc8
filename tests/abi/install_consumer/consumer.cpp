// The same check from C++: the installed header must compile as C++ too.
#include <llm/llm.h>

#include <cstdio>
#include <string>

int main() {
  const std::string compiled = std::to_string(LLM_VERSION_MAJOR) + "." +
                               std::to_string(LLM_VERSION_MINOR) + "." +
                               std::to_string(LLM_VERSION_PATCH);
  const char *v = llm_version();
  if (v == nullptr || compiled != v) {
    std::fprintf(stderr, "llm_version() %s != header %s\n", v ? v : "(null)", compiled.c_str());
    return 1;
  }
  std::printf("llm_version=%s\n", v);
  return 0;
}
