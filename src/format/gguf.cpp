// GGUF v2/v3 parser. Layout (all little-endian):
//   magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count  x { string key | u32 type | value }
//   tensor_count x { string name | u32 n_dims | u64 dims[n_dims] | u32 type | u64 offset }
//   padding to general.alignment (default 32) | tensor data
// string = u64 length + bytes (no NUL); array = u32 elem type + u64 count + elements.
//
// Every read is bounds-checked against the bytes left; counts are compared
// against remaining / minimum-entry-size before any loop or allocation, and
// all offset arithmetic is overflow-checked, so a hostile file yields
// LLM_ERR_BAD_MODEL and never a crash or a huge allocation.
#include "format/gguf.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace llm {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kMaxDims = 4;             // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 16;           // nesting limit for arrays of arrays
// Smallest possible encodings, used to refuse counts that cannot fit.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;          // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, 1 dim, type, offset
constexpr uint64_t kMinArrayHeaderBytes = 4 + 8;     // elem type + count

const char* TypeName(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "?";
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kF64); }

// Encoded size of a fixed-size value; 0 for string and array.
uint64_t FixedSize(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    case GgufType::kString: case GgufType::kArray: return 0;
  }
  return 0;
}

bool IsUnsignedInt(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kU16 || t == GgufType::kU32 || t == GgufType::kU64;
}
bool IsSignedInt(GgufType t) {
  return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}
bool IsFloat(GgufType t) { return t == GgufType::kF32 || t == GgufType::kF64; }

template <typename T>
T LoadLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // x86/ARM little-endian hosts only (as GGUF)
  return v;
}

// Decode a fixed-size scalar at p (caller checked FixedSize(t) bytes) into v.
void DecodeScalar(GgufType t, const uint8_t* p, GgufValue* v) {
  v->type = t;
  switch (t) {
    case GgufType::kU8: v->u = p[0]; break;
    case GgufType::kU16: v->u = LoadLE<uint16_t>(p); break;
    case GgufType::kU32: v->u = LoadLE<uint32_t>(p); break;
    case GgufType::kU64: v->u = LoadLE<uint64_t>(p); break;
    case GgufType::kBool: v->u = p[0] != 0 ? 1 : 0; break;
    case GgufType::kI8: v->i = static_cast<int8_t>(p[0]); break;
    case GgufType::kI16: v->i = LoadLE<int16_t>(p); break;
    case GgufType::kI32: v->i = LoadLE<int32_t>(p); break;
    case GgufType::kI64: v->i = LoadLE<int64_t>(p); break;
    case GgufType::kF32: v->f = LoadLE<float>(p); break;
    case GgufType::kF64: v->f = LoadLE<double>(p); break;
    case GgufType::kString: case GgufType::kArray: return;
  }
  if (IsUnsignedInt(t) || t == GgufType::kBool) {
    if (v->u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) v->i = static_cast<int64_t>(v->u);
    v->f = static_cast<double>(v->u);
  } else if (IsSignedInt(t)) {
    if (v->i >= 0) v->u = static_cast<uint64_t>(v->i);
    v->f = static_cast<double>(v->i);
  }
}

// This Abseil build has its own string_view (ABSL_OPTION_USE_STD_STRING_VIEW
// is 0), so std::string_view must be converted for StrCat / StrFormat.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status BadModel(std::string msg, uint64_t offset) {
  return Error(LLM_ERR_BAD_MODEL, absl::StrCat("GGUF: ", msg, " (byte offset ", offset, ")"));
}

}  // namespace

class GgufParser {
 public:
  GgufParser(GgufFile* file, const uint8_t* data, size_t size) : file_(file), data_(data), size_(size) {}

  absl::Status Run() {
    LLM_RETURN_IF_ERROR(ParseHeader());
    LLM_RETURN_IF_ERROR(ParseMetadata());
    LLM_RETURN_IF_ERROR(ParseTensorInfos());
    LLM_RETURN_IF_ERROR(PlaceTensorData());
    if (unsupported_tensor_ != nullptr) {
      const auto traits = GetDTypeTraits(static_cast<uint32_t>(unsupported_tensor_->type));
      return Errorf(LLM_ERR_UNSUPPORTED,
                    "GGUF: tensor '%s' has type %s, which libllm does not support (byte offset %d)",
                    unsupported_tensor_->name, traits ? traits->name : "?", unsupported_type_at_);
    }
    return absl::OkStatus();
  }

 private:
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Truncated(const std::string& what, uint64_t need) const {
    return BadModel(absl::StrCat("file truncated reading ", what, ": needs ", need, " bytes, ", remaining(),
                                 " left"),
                    pos_);
  }

  // Reads a fixed-size little-endian value, naming `what` on truncation.
  template <typename T>
  absl::Status Read(T* out, const std::string& what) {
    if (remaining() < sizeof(T)) return Truncated(what, sizeof(T));
    *out = LoadLE<T>(data_ + pos_);
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string_view* out, const std::string& what) {
    uint64_t len = 0;
    LLM_RETURN_IF_ERROR(Read(&len, absl::StrCat("length of ", what)));
    if (len > remaining()) {
      return BadModel(absl::StrCat("length ", len, " of ", what, " exceeds the ", remaining(), " bytes left"),
                      pos_ - 8);
    }
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return absl::OkStatus();
  }

  absl::Status ParseHeader() {
    uint32_t magic = 0;
    LLM_RETURN_IF_ERROR(Read(&magic, "magic"));
    if (magic != kGgufMagic) {
      return BadModel(absl::StrFormat("not a GGUF file: magic is 0x%08x, expected 0x%08x (\"GGUF\")", magic,
                                      kGgufMagic),
                      0);
    }
    LLM_RETURN_IF_ERROR(Read(&version_, "version"));
    if (version_ == 1) {
      return Errorf(LLM_ERR_UNSUPPORTED, "GGUF: version 1 is not supported (only 2 and 3) (byte offset 4)");
    }
    if (version_ == 0) return BadModel("version 0 is invalid", 4);
    if (version_ > 3) {
      // A byte-swapped small number means a big-endian GGUF.
      const bool swapped = (version_ & 0xffff) == 0 && (version_ >> 24) <= 3;
      return Errorf(LLM_ERR_UNSUPPORTED, "GGUF: version %u is not supported (only 2 and 3)%s (byte offset 4)",
                    version_, swapped ? "; this looks like a big-endian file" : "");
    }
    const uint64_t counts_at = pos_;
    LLM_RETURN_IF_ERROR(Read(&tensor_count_, "tensor count"));
    LLM_RETURN_IF_ERROR(Read(&kv_count_, "metadata count"));
    if (kv_count_ > remaining() / kMinKvBytes) {
      return BadModel(absl::StrCat("metadata count ", kv_count_, " cannot fit in the ", remaining(),
                                   " bytes left"),
                      counts_at + 8);
    }
    if (tensor_count_ > remaining() / kMinTensorInfoBytes) {
      return BadModel(absl::StrCat("tensor count ", tensor_count_, " cannot fit in the ", remaining(),
                                   " bytes left"),
                      counts_at);
    }
    file_->version_ = version_;
    return absl::OkStatus();
  }

  // Skips (and validates) `count` elements of `type` starting at pos_.
  absl::Status SkipArrayElements(GgufType type, uint64_t count, const std::string& what, int depth) {
    const uint64_t at = pos_;
    const uint64_t fixed = FixedSize(type);
    if (fixed != 0) {
      if (count > remaining() / fixed) {
        return BadModel(absl::StrCat("array count ", count, " of ", what, " (", TypeName(type), ", ", fixed,
                                     " bytes each) exceeds the ", remaining(), " bytes left"),
                        at);
      }
      pos_ += count * fixed;
      return absl::OkStatus();
    }
    if (type == GgufType::kString) {
      if (count > remaining() / 8) {
        return BadModel(absl::StrCat("string array count ", count, " of ", what, " exceeds the ",
                                     remaining(), " bytes left"),
                        at);
      }
      for (uint64_t k = 0; k < count; ++k) {
        std::string_view s;
        LLM_RETURN_IF_ERROR(ReadString(&s, absl::StrCat(what, "[", k, "]")));
      }
      return absl::OkStatus();
    }
    // Array of arrays: each element is a nested array; validated and skipped.
    if (depth >= kMaxArrayDepth) {
      return BadModel(absl::StrCat(what, " nests arrays deeper than ", kMaxArrayDepth, " levels"), at);
    }
    if (count > remaining() / kMinArrayHeaderBytes) {
      return BadModel(absl::StrCat("nested array count ", count, " of ", what, " exceeds the ", remaining(),
                                   " bytes left"),
                      at);
    }
    for (uint64_t k = 0; k < count; ++k) {
      const std::string elem = absl::StrCat(what, "[", k, "]");
      GgufType inner = GgufType::kU8;
      uint64_t inner_count = 0;
      LLM_RETURN_IF_ERROR(ReadArrayHeader(&inner, &inner_count, elem));
      LLM_RETURN_IF_ERROR(SkipArrayElements(inner, inner_count, elem, depth + 1));
    }
    return absl::OkStatus();
  }

  absl::Status ReadArrayHeader(GgufType* type, uint64_t* count, const std::string& what) {
    uint32_t t = 0;
    LLM_RETURN_IF_ERROR(Read(&t, absl::StrCat("element type of ", what)));
    if (!IsKnownType(t)) {
      return BadModel(absl::StrCat("unknown element type ", t, " of ", what), pos_ - 4);
    }
    *type = static_cast<GgufType>(t);
    LLM_RETURN_IF_ERROR(Read(count, absl::StrCat("element count of ", what)));
    return absl::OkStatus();
  }

  absl::Status ParseValue(GgufType type, const std::string& what, GgufValue* v) {
    v->type = type;
    if (type == GgufType::kString) return ReadString(&v->str, what);
    if (type == GgufType::kArray) {
      LLM_RETURN_IF_ERROR(ReadArrayHeader(&v->array_type, &v->array_count, what));
      const uint64_t start = pos_;
      LLM_RETURN_IF_ERROR(SkipArrayElements(v->array_type, v->array_count, what, 1));
      v->array_data = data_ + start;
      v->array_bytes = pos_ - start;
      return absl::OkStatus();
    }
    const uint64_t n = FixedSize(type);
    if (remaining() < n) return Truncated(what, n);
    DecodeScalar(type, data_ + pos_, v);
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status ParseMetadata() {
    const GgufValue* alignment = nullptr;
    uint64_t alignment_at = 0;
    // No reserve(): the vector grows only with entries actually parsed.
    for (uint64_t k = 0; k < kv_count_; ++k) {
      const uint64_t key_at = pos_;
      std::string_view key;
      LLM_RETURN_IF_ERROR(ReadString(&key, absl::StrCat("key of metadata entry ", k)));
      if (key.empty()) return BadModel(absl::StrCat("metadata entry ", k, " has an empty key"), key_at);
      if (file_->kv_index_.count(key) != 0) {
        return BadModel(absl::StrCat("duplicate metadata key '", AV(key), "'"), key_at);
      }
      const std::string what = absl::StrCat("metadata '", AV(key), "'");
      uint32_t type = 0;
      LLM_RETURN_IF_ERROR(Read(&type, absl::StrCat("type of ", what)));
      if (!IsKnownType(type)) return BadModel(absl::StrCat("unknown value type ", type, " of ", what), pos_ - 4);
      const uint64_t value_at = pos_;
      GgufValue value;
      LLM_RETURN_IF_ERROR(ParseValue(static_cast<GgufType>(type), what, &value));
      file_->kv_index_.emplace(key, file_->kv_.size());
      file_->kv_.emplace_back(std::string(key), value);
      if (key == "general.alignment") {
        alignment = &file_->kv_.back().second;
        alignment_at = value_at;
      }
    }
    if (alignment != nullptr) {
      // Spec: u32. Any unsigned integer is accepted; it must be a power of two.
      alignment = &file_->kv_[file_->kv_index_.at("general.alignment")].second;
      if (!IsUnsignedInt(alignment->type) && !(IsSignedInt(alignment->type) && alignment->i > 0)) {
        return BadModel(absl::StrCat("general.alignment has type ", TypeName(alignment->type),
                                     ", expected an unsigned integer"),
                        alignment_at);
      }
      const uint64_t a = alignment->u;
      if (a == 0 || (a & (a - 1)) != 0) {
        return BadModel(absl::StrCat("general.alignment ", a, " is not a non-zero power of two"), alignment_at);
      }
      file_->alignment_ = a;
    }
    return absl::OkStatus();
  }

  absl::Status ParseTensorInfos() {
    if (tensor_count_ > remaining() / kMinTensorInfoBytes) {
      return BadModel(absl::StrCat("tensor count ", tensor_count_, " cannot fit in the ", remaining(),
                                   " bytes left"),
                      pos_);
    }
    // The check above still lets the count reach file size / 32, and a
    // GgufTensor is ~3x larger than that: reserving it all would allocate
    // ~3x the file before reading one tensor info (docs/FUZZING.md, finding
    // 1). Reserve a little; the vector grows only with infos actually parsed.
    file_->tensors_.reserve(static_cast<size_t>(std::min<uint64_t>(tensor_count_, 1024)));
    for (uint64_t k = 0; k < tensor_count_; ++k) {
      const uint64_t name_at = pos_;
      std::string_view name;
      LLM_RETURN_IF_ERROR(ReadString(&name, absl::StrCat("name of tensor ", k)));
      if (name.empty()) return BadModel(absl::StrCat("tensor ", k, " has an empty name"), name_at);
      if (file_->tensor_index_.count(name) != 0) {
        return BadModel(absl::StrCat("duplicate tensor name '", AV(name), "'"), name_at);
      }
      const std::string what = absl::StrCat("tensor '", AV(name), "'");
      uint32_t n_dims = 0;
      LLM_RETURN_IF_ERROR(Read(&n_dims, absl::StrCat("dimension count of ", what)));
      if (n_dims == 0 || n_dims > kMaxDims) {
        return BadModel(absl::StrCat(what, " has ", n_dims, " dimensions (1..", kMaxDims, " allowed)"), pos_ - 4);
      }
      GgufTensor t;
      t.name = std::string(name);
      t.dims.resize(n_dims);
      uint64_t n_elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        LLM_RETURN_IF_ERROR(Read(&t.dims[d], absl::StrCat("dims[", d, "] of ", what)));
        const uint64_t dim = t.dims[d];
        // ggml keeps dims and element counts in int64_t.
        if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return BadModel(absl::StrCat("dims[", d, "] = ", dim, " of ", what, " is out of range"), pos_ - 8);
        }
        if (n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim) {
          return BadModel(absl::StrCat("element count of ", what, " overflows"), pos_ - 8);
        }
        n_elements *= dim;
      }
      t.n_elements = n_elements;
      uint32_t type_id = 0;
      LLM_RETURN_IF_ERROR(Read(&type_id, absl::StrCat("type of ", what)));
      const auto traits = GetDTypeTraits(type_id);
      if (!traits) return BadModel(absl::StrCat(what, " has unknown type id ", type_id), pos_ - 4);
      t.type = static_cast<DType>(type_id);
      if (t.dims[0] % traits->block_elems != 0) {
        return BadModel(absl::StrCat("row length ", t.dims[0], " of ", what, " is not a multiple of the ",
                                     traits->name, " block size ", traits->block_elems),
                        pos_ - 4);
      }
      const uint64_t blocks = n_elements / traits->block_elems;
      if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) {
        return BadModel(absl::StrCat("byte size of ", what, " overflows"), pos_ - 4);
      }
      t.n_bytes = blocks * traits->block_bytes;
      LLM_RETURN_IF_ERROR(Read(&t.offset, absl::StrCat("data offset of ", what)));
      if (t.offset % file_->alignment_ != 0) {
        return BadModel(absl::StrCat("data offset ", t.offset, " of ", what, " is not a multiple of the alignment ",
                                     file_->alignment_),
                        pos_ - 8);
      }
      offset_at_.push_back(pos_ - 8);
      type_at_.push_back(pos_ - 12);
      file_->tensor_index_.emplace(name, file_->tensors_.size());
      file_->tensors_.push_back(std::move(t));
    }
    return absl::OkStatus();
  }

  // Resolves each tensor's relative offset into the buffer and checks that
  // every byte range is inside the buffer and no two ranges overlap.
  absl::Status PlaceTensorData() {
    if (file_->tensors_.empty()) return absl::OkStatus();  // data section may be absent
    const uint64_t a = file_->alignment_;
    const uint64_t rem = pos_ % a;
    if (rem != 0 && a - rem > remaining()) {
      return BadModel(absl::StrCat("file ends inside the padding before the tensor data (alignment ", a, ")"),
                      pos_);
    }
    const uint64_t data_start = rem == 0 ? pos_ : pos_ + (a - rem);
    const uint64_t data_size = size_ - data_start;
    std::vector<size_t> order(file_->tensors_.size());
    for (size_t k = 0; k < order.size(); ++k) {
      GgufTensor& t = file_->tensors_[k];
      if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
        return BadModel(absl::StrCat("data of tensor '", t.name, "' (", t.n_bytes, " bytes at data offset ",
                                     t.offset, ") lies outside the ", data_size, "-byte data section"),
                        offset_at_[k]);
      }
      t.offset += data_start;
      t.data = data_ + t.offset;
      order[k] = k;
      if (!GetDTypeTraits(static_cast<uint32_t>(t.type))->supported && unsupported_tensor_ == nullptr) {
        unsupported_tensor_ = &t;
        unsupported_type_at_ = type_at_[k];
      }
    }
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return file_->tensors_[x].offset < file_->tensors_[y].offset;
    });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensor& prev = file_->tensors_[order[k - 1]];
      const GgufTensor& cur = file_->tensors_[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset) {
        return BadModel(absl::StrCat("data of tensor '", cur.name, "' overlaps tensor '", prev.name, "'"),
                        offset_at_[order[k]]);
      }
    }
    return absl::OkStatus();
  }

  GgufFile* file_;
  const uint8_t* data_;
  size_t size_;
  uint64_t pos_ = 0;
  uint32_t version_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  std::vector<uint64_t> offset_at_;  // byte offset of each tensor's offset field
  std::vector<uint64_t> type_at_;    // byte offset of each tensor's type field
  uint64_t unsupported_type_at_ = 0;
  const GgufTensor* unsupported_tensor_ = nullptr;
};

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(const uint8_t* data, size_t size) {
  if (data == nullptr && size != 0) return Error(LLM_ERR_INVALID_ARGUMENT, "GGUF: null buffer of non-zero size");
  try {
    std::unique_ptr<GgufFile> file(new GgufFile());
    file->data_ = data;
    file->size_ = size;
    static const uint8_t kEmpty = 0;
    GgufParser parser(file.get(), data != nullptr ? data : &kEmpty, size);
    LLM_RETURN_IF_ERROR(parser.Run());
    return file;
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "GGUF: out of memory while parsing");
  } catch (const std::exception& e) {
    return Error(LLM_ERR_INTERNAL, absl::StrCat("GGUF: unexpected error while parsing: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping, MappedFile::Open(path));
  auto parsed = Parse(mapping->data(), mapping->size());
  if (!parsed.ok()) {
    const absl::Status& s = parsed.status();
    return Error(ToLlmStatus(s), absl::StrCat(s.message(), " in '", path, "'"));
  }
  std::unique_ptr<GgufFile> file = std::move(parsed).value();
  file->mapping_ = std::move(mapping);
  return file;
}

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

absl::Status WrongType(std::string_view key, const GgufValue& v, const char* wanted) {
  return Errorf(LLM_ERR_BAD_MODEL, "GGUF: metadata '%s' has type %s, expected %s", AV(key),
                v.type == GgufType::kArray ? absl::StrCat("array of ", TypeName(v.array_type)) : TypeName(v.type),
                wanted);
}

}  // namespace

absl::StatusOr<std::optional<uint64_t>> GgufFile::GetUint(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<uint64_t>();
  if (IsUnsignedInt(v->type)) return std::optional<uint64_t>(v->u);
  if (IsSignedInt(v->type)) {
    if (v->i < 0) return Errorf(LLM_ERR_BAD_MODEL, "GGUF: metadata '%s' is negative (%d)", AV(key), v->i);
    return std::optional<uint64_t>(static_cast<uint64_t>(v->i));
  }
  return WrongType(key, *v, "an unsigned integer");
}

absl::StatusOr<std::optional<int64_t>> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (IsSignedInt(v->type)) return std::optional<int64_t>(v->i);
  if (IsUnsignedInt(v->type)) {
    if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Errorf(LLM_ERR_BAD_MODEL, "GGUF: metadata '%s' = %d does not fit in int64", AV(key), v->u);
    }
    return std::optional<int64_t>(static_cast<int64_t>(v->u));
  }
  return WrongType(key, *v, "an integer");
}

absl::StatusOr<std::optional<double>> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<double>();
  if (IsFloat(v->type) || IsSignedInt(v->type) || IsUnsignedInt(v->type)) return std::optional<double>(v->f);
  return WrongType(key, *v, "a number");
}

absl::StatusOr<std::optional<bool>> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<bool>();
  if (v->type == GgufType::kBool) return std::optional<bool>(v->u != 0);
  return WrongType(key, *v, "bool");
}

absl::StatusOr<std::optional<std::string_view>> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<std::string_view>();
  if (v->type == GgufType::kString) return std::optional<std::string_view>(v->str);
  return WrongType(key, *v, "string");
}

absl::StatusOr<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::vector<std::string_view>();
  if (v->type != GgufType::kArray || v->array_type != GgufType::kString) {
    return WrongType(key, *v, "array of string");
  }
  try {
    std::vector<std::string_view> out;
    out.reserve(static_cast<size_t>(v->array_count));  // parse checked: count <= array_bytes / 8
    const uint8_t* p = v->array_data;
    uint64_t left = v->array_bytes;
    for (uint64_t k = 0; k < v->array_count; ++k) {
      // Validated by the parser; re-checked so a logic slip cannot read out of bounds.
      if (left < 8) return Errorf(LLM_ERR_INTERNAL, "GGUF: string array '%s' overruns", AV(key));
      const uint64_t len = LoadLE<uint64_t>(p);
      p += 8;
      left -= 8;
      if (len > left) return Errorf(LLM_ERR_INTERNAL, "GGUF: string array '%s' overruns", AV(key));
      out.emplace_back(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
      p += len;
      left -= len;
    }
    return out;
  } catch (const std::bad_alloc&) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY, "GGUF: out of memory reading '%s'", AV(key));
  }
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::vector<int64_t>();
  if (v->type != GgufType::kArray || !(IsSignedInt(v->array_type) || IsUnsignedInt(v->array_type))) {
    return WrongType(key, *v, "array of integers");
  }
  try {
    const uint64_t size = FixedSize(v->array_type);
    std::vector<int64_t> out(static_cast<size_t>(v->array_count));  // count * size == array_bytes
    for (uint64_t k = 0; k < v->array_count; ++k) {
      GgufValue e;
      DecodeScalar(v->array_type, v->array_data + k * size, &e);
      if (v->array_type == GgufType::kU64 && e.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Errorf(LLM_ERR_BAD_MODEL, "GGUF: metadata '%s'[%d] = %d does not fit in int64", AV(key), k, e.u);
      }
      out[k] = e.i;
    }
    return out;
  } catch (const std::bad_alloc&) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY, "GGUF: out of memory reading '%s'", AV(key));
  }
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::vector<float>();
  if (v->type != GgufType::kArray ||
      !(IsFloat(v->array_type) || IsSignedInt(v->array_type) || IsUnsignedInt(v->array_type))) {
    return WrongType(key, *v, "array of numbers");
  }
  try {
    const uint64_t size = FixedSize(v->array_type);
    std::vector<float> out(static_cast<size_t>(v->array_count));
    for (uint64_t k = 0; k < v->array_count; ++k) {
      GgufValue e;
      DecodeScalar(v->array_type, v->array_data + k * size, &e);
      out[k] = static_cast<float>(e.f);
    }
    return out;
  } catch (const std::bad_alloc&) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY, "GGUF: out of memory reading '%s'", AV(key));
  }
}

}  // namespace llm
