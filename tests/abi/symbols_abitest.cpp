// The shared library exports exactly the functions include/llm/llm.h declares
// (no Abseil, oneDNN, C++ runtime or internal llm_* helpers leak out), and its
// SONAME is libllm.so.<major>, so that a host can link against it and a minor
// release can replace it.
//
// The declared set is parsed from the header text (every `LLM_API ...
// llm_xxx(` declaration); the exported set is read with `nm -D
// --defined-only` and the SONAME with `readelf -d` (binutils) from the built
// library, whose path tests/CMakeLists.txt passes in LLM_SHARED_LIBRARY.

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "llm/llm.h"

namespace {

std::string ReadFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// stdout of `cmd`; *ok is false when it could not run or exited non-zero.
std::string RunCommand(const std::string &cmd, bool *ok) {
  std::string out;
  FILE *p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *ok = false;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *ok = ::pclose(p) == 0;
  return out;
}

std::string Quote(const std::string &s) { return "'" + s + "'"; }

// Function names declared with LLM_API in the header.
std::set<std::string> DeclaredFunctions() {
  std::string text = ReadFile(std::string(LLM_SOURCE_DIR) + "/include/llm/llm.h");
  // Drop comments so that prose mentioning LLM_API cannot count.
  text = std::regex_replace(text, std::regex(R"(/\*[\s\S]*?\*/)"), " ");
  text = std::regex_replace(text, std::regex(R"(//[^\n]*)"), " ");
  std::set<std::string> names;
  // `LLM_API <return type, maybe with * and spaces> llm_name(`, possibly
  // across lines; [^;(]* keeps one match within one declaration.
  const std::regex decl(R"(LLM_API\s[^;(]*?\b(llm_[A-Za-z0-9_]+)\s*\()");
  for (std::sregex_iterator it(text.begin(), text.end(), decl), end; it != end; ++it)
    names.insert((*it)[1].str());
  return names;
}

std::string Show(const std::set<std::string> &s) {
  std::string out;
  for (const std::string &x : s) out += "\n    " + x;
  return out.empty() ? " (none)" : out;
}

TEST(AbiSymbols, HeaderParsesToTheKnownFunctionCount) {
  // Guards the parser: the 0.1 header declared 29 functions, 0.2 adds 16,
  // 0.3 adds 13 (the sized llm_*_init_v, llm_chat_format_v, llm_chat_format_ex
  // and llm_chat_options_init_v).
  const std::set<std::string> d = DeclaredFunctions();
  EXPECT_EQ(d.size(), 58u) << Show(d);
  for (const char *f :
       {"llm_status_string", "llm_last_error", "llm_version", "llm_set_log_callback",
        "llm_model_load", "llm_generate", "llm_session_prefill", "llm_generate_result_init",
        "llm_session_prefill_async", "llm_session_poll", "llm_session_cancel", "llm_session_fork",
        "llm_session_load", "llm_model_kv_stats", "llm_model_params_init",
        "llm_model_params_init_v", "llm_sampler_ext_init_v", "llm_chat_format",
        "llm_chat_format_v", "llm_chat_format_ex", "llm_chat_options_init_v"})
    EXPECT_TRUE(d.count(f)) << f << " was not found in llm.h";
}

TEST(AbiSymbols, ExportsExactlyTheDeclaredFunctions) {
  const std::set<std::string> declared = DeclaredFunctions();
  ASSERT_FALSE(declared.empty());
  bool ok = false;
  const std::string lib = LLM_SHARED_LIBRARY;
  const std::string out = RunCommand("nm -D --defined-only " + Quote(lib) + " 2>&1", &ok);
  ASSERT_TRUE(ok) << "nm -D --defined-only " << lib << " failed:\n" << out;

  // Lines: "<address> <type> <name>[@@version]".
  const std::set<std::string> linker = {"_init", "_fini", "_edata", "_end", "__bss_start"};
  std::set<std::string> exported, functions_not_text;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string addr, type, name;
    if (!(f >> addr >> type >> name)) continue;
    const size_t at = name.find('@');
    if (at != std::string::npos) name.resize(at);
    if (linker.count(name)) continue;
    exported.insert(name);
    if (declared.count(name) && type != "T") functions_not_text.insert(name + " (" + type + ")");
  }
  std::set<std::string> extra, missing;
  for (const std::string &e : exported)
    if (!declared.count(e)) extra.insert(e);
  for (const std::string &d : declared)
    if (!exported.count(d)) missing.insert(d);
  EXPECT_TRUE(extra.empty()) << extra.size() << " symbols exported from " << lib
                             << " that llm.h does not declare:" << Show(extra);
  EXPECT_TRUE(missing.empty()) << missing.size() << " functions llm.h declares that " << lib
                               << " does not export:" << Show(missing);
  EXPECT_TRUE(functions_not_text.empty())
      << "declared functions exported as something other than code (nm type T):"
      << Show(functions_not_text);
}

TEST(AbiSymbols, SonameCarriesTheMajorVersion) {
  bool ok = false;
  const std::string lib = LLM_SHARED_LIBRARY;
  const std::string out = RunCommand("readelf -d " + Quote(lib) + " 2>&1", &ok);
  ASSERT_TRUE(ok) << "readelf -d " << lib << " failed:\n" << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(\(SONAME\)[^\[]*\[([^\]]+)\])")))
      << lib << " has no SONAME:\n" << out;
  EXPECT_EQ(m[1].str(), "libllm.so." + std::to_string(LLM_VERSION_MAJOR));
}

TEST(AbiSymbols, NoUndefinedReferencesToTheBuildTree) {
  // The library must not need the test or reference code: no undefined llm_
  // or C++ symbols of the llm namespace (they would come from a static
  // library that was not linked in whole).
  bool ok = false;
  const std::string lib = LLM_SHARED_LIBRARY;
  const std::string out = RunCommand("nm -D --undefined-only " + Quote(lib) + " 2>&1", &ok);
  ASSERT_TRUE(ok) << out;
  std::set<std::string> bad;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string type, name;
    if (!(f >> type >> name)) continue;
    if (name.rfind("llm_", 0) == 0 || name.find("_ZN3llm") == 0) bad.insert(name);
  }
  EXPECT_TRUE(bad.empty()) << "undefined symbols of libllm's own code:" << Show(bad);
}

}  // namespace
