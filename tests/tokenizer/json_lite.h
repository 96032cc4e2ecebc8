// Minimal JSON reader for the tokenizer goldens (tests only): objects,
// arrays, strings (with \uXXXX escapes), numbers, true/false/null. Throws
// std::runtime_error on malformed input, which fails the test that reads it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace llm {
namespace testing_json {

struct Value {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Value> arr;
  std::map<std::string, Value> obj;

  const Value& operator[](const std::string& key) const {
    auto it = obj.find(key);
    if (kind != kObject || it == obj.end()) throw std::runtime_error("json: missing key " + key);
    return it->second;
  }
  bool has(const std::string& key) const { return kind == kObject && obj.count(key) != 0; }
  int64_t i() const { return static_cast<int64_t>(num); }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  Value Parse() {
    Value v = ParseValue();
    Ws();
    if (p_ != s_.size()) Fail("trailing data");
    return v;
  }

 private:
  [[noreturn]] void Fail(const char* what) {
    throw std::runtime_error(std::string("json: ") + what + " at " + std::to_string(p_));
  }
  void Ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t'))
      ++p_;
  }
  char Peek() {
    Ws();
    if (p_ >= s_.size()) Fail("unexpected end");
    return s_[p_];
  }
  void Expect(char c) {
    if (Peek() != c) Fail("unexpected character");
    ++p_;
  }
  Value ParseValue() {
    const char c = Peek();
    Value v;
    if (c == '{') {
      v.kind = Value::kObject;
      ++p_;
      if (Peek() == '}') {
        ++p_;
        return v;
      }
      while (true) {
        std::string key = ParseString();
        Expect(':');
        v.obj[key] = ParseValue();
        if (Peek() == ',') {
          ++p_;
          continue;
        }
        Expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = Value::kArray;
      ++p_;
      if (Peek() == ']') {
        ++p_;
        return v;
      }
      while (true) {
        v.arr.push_back(ParseValue());
        if (Peek() == ',') {
          ++p_;
          continue;
        }
        Expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = Value::kString;
      v.str = ParseString();
      return v;
    }
    if (s_.compare(p_, 4, "true") == 0) {
      p_ += 4;
      v.kind = Value::kBool;
      v.b = true;
      return v;
    }
    if (s_.compare(p_, 5, "false") == 0) {
      p_ += 5;
      v.kind = Value::kBool;
      return v;
    }
    if (s_.compare(p_, 4, "null") == 0) {
      p_ += 4;
      return v;
    }
    const char* begin = s_.c_str() + p_;
    char* end = nullptr;
    v.kind = Value::kNumber;
    v.num = std::strtod(begin, &end);
    if (end == begin) Fail("bad value");
    p_ += static_cast<size_t>(end - begin);
    return v;
  }
  static void PutUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  uint32_t Hex4() {
    if (p_ + 4 > s_.size()) Fail("short \\u escape");
    const uint32_t v = static_cast<uint32_t>(std::stoul(s_.substr(p_, 4), nullptr, 16));
    p_ += 4;
    return v;
  }
  std::string ParseString() {
    Expect('"');
    std::string out;
    while (true) {
      if (p_ >= s_.size()) Fail("unterminated string");
      const char c = s_[p_++];
      if (c == '"') return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (p_ >= s_.size()) Fail("bad escape");
      const char e = s_[p_++];
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'u': {
          uint32_t cp = Hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(p_, 2, "\\u") == 0) {
            p_ += 2;
            const uint32_t lo = Hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          PutUtf8(cp, &out);
          break;
        }
        default:
          out.push_back(e);
          break;
      }
    }
  }
  const std::string& s_;
  size_t p_ = 0;
};

inline Value Parse(const std::string& text) { return Parser(text).Parse(); }

inline std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace testing_json
}  // namespace llm
