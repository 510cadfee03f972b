#include "maxc/Frontend/Safetensors.h"

#include "maxc/Support/Error.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/JsonCheck.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace maxc {

namespace {

using json = nlohmann::json;

// The reference loader refuses larger headers; so do we, which also bounds
// the work a hostile file can ask for.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

std::string supported_dtypes() {
  std::string s;
  for (const DTypeInfo &d : kDTypeInfo)
    s += (s.empty() ? "" : ", ") + std::string(d.safetensors_name);
  return s;
}

std::string tensor_prefix(const std::string &name) { return "tensor '" + name + "': "; }

// nlohmann prefixes its messages with "[json.exception.parse_error.101] ".
std::string strip_json_prefix(const std::string &what) {
  if (!what.empty() && what[0] == '[') {
    size_t close = what.find("] ");
    if (close != std::string::npos)
      return what.substr(close + 2);
  }
  return what;
}

// A JSON integer as a non-negative int64, or nullopt.
std::optional<int64_t> as_nonneg_i64(const json &v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX))
      return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0)
      return std::nullopt;
    return i;
  }
  return std::nullopt;
}

std::string show(const json &v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

SafetensorsFile::TensorInfo parse_entry(const std::string &name, const json &entry,
                                        uint64_t data_size, const std::string &file) {
  const std::string at = tensor_prefix(name);
  auto header_error = [&](const std::string &msg) {
    return Error(ErrorCode::SafetensorsHeader, at + msg, file);
  };
  if (!entry.is_object())
    throw header_error("entry must be a JSON object, got " + std::string(entry.type_name()));

  SafetensorsFile::TensorInfo info;

  auto dt = entry.find("dtype");
  if (dt == entry.end())
    throw header_error("missing \"dtype\"");
  if (!dt->is_string())
    throw header_error("\"dtype\" must be a string, got " + show(*dt));
  const std::string &dtype_text = dt->get_ref<const std::string &>();
  auto dtype = parse_safetensors_dtype(dtype_text);
  if (!dtype)
    throw Error(ErrorCode::SafetensorsDType,
                at + "unsupported dtype \"" + dtype_text + "\" (maxc reads " + supported_dtypes() + ")",
                file);
  info.dtype = *dtype;

  auto sh = entry.find("shape");
  if (sh == entry.end())
    throw header_error("missing \"shape\"");
  if (!sh->is_array())
    throw header_error("\"shape\" must be an array of non-negative integers, got " + show(*sh));
  int64_t numel = 1;
  for (const json &d : *sh) {
    auto dim = as_nonneg_i64(d);
    if (!dim) {
      if (d.is_number_integer() || d.is_number_unsigned())
        throw header_error("dimension " + show(d) + " in \"shape\" " + show(*sh) +
                           (d.is_number_unsigned() ? " is too large" : " is negative"));
      throw header_error("\"shape\" must be an array of non-negative integers, got " + show(*sh));
    }
    if (__builtin_mul_overflow(numel, *dim, &numel))
      throw header_error("element count of shape " + show(*sh) + " overflows 64 bits");
    info.shape.push_back(*dim);
  }
  uint64_t nbytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(dtype_size(info.dtype)),
                             &nbytes))
    throw header_error("byte size of shape " + show(*sh) + " overflows 64 bits");

  auto off = entry.find("data_offsets");
  if (off == entry.end())
    throw header_error("missing \"data_offsets\"");
  if (!off->is_array() || off->size() != 2 || !as_nonneg_i64((*off)[0]) || !as_nonneg_i64((*off)[1]))
    throw header_error("\"data_offsets\" must be [begin, end] with non-negative integers, got " + show(*off));
  info.data_begin = static_cast<uint64_t>(*as_nonneg_i64((*off)[0]));
  info.data_end = static_cast<uint64_t>(*as_nonneg_i64((*off)[1]));

  auto offsets_error = [&](const std::string &msg) {
    return Error(ErrorCode::SafetensorsOffsets, at + msg, file);
  };
  std::string range = "data_offsets [" + std::to_string(info.data_begin) + ", " + std::to_string(info.data_end) + "]";
  if (info.data_begin > info.data_end)
    throw offsets_error(range + " begin after end");
  if (info.data_end > data_size)
    throw offsets_error(range + " go past the end of the data section (" + std::to_string(data_size) + " bytes)");
  if (info.data_end - info.data_begin != nbytes)
    throw offsets_error(range + " hold " + std::to_string(info.data_end - info.data_begin) +
                        " bytes but " + dtype_text + " " + show(*sh) + " needs " + std::to_string(nbytes));
  return info;
}

// JSON string literal for `s`; InvalidArgument when s is not UTF-8.
std::string json_quote(const std::string &s, const char *what) {
  try {
    return json(s).dump();
  } catch (const json::exception &) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + " '" + s + "' is not valid UTF-8");
  }
}

// The file prefix (length + header) and the order the tensors' bytes follow it.
struct WritePlan {
  std::string prefix;
  std::vector<const HostTensor *> order;
};

WritePlan plan_safetensors(const std::map<std::string, HostTensor> &tensors,
                           const std::map<std::string, std::string> &metadata) {
  std::vector<std::pair<const std::string *, const HostTensor *>> items;
  for (const auto &[name, t] : tensors) {
    if (name == "__metadata__")
      throw Error(ErrorCode::InvalidArgument, "'__metadata__' is reserved and cannot name a tensor");
    if (!t.valid())
      throw Error(ErrorCode::InvalidArgument, tensor_prefix(name) + "has no storage");
    items.emplace_back(&name, &t);
  }
  // Largest elements first keeps every tensor aligned to its element size
  // without gaps (each group's byte size is a multiple of the next's size).
  std::stable_sort(items.begin(), items.end(), [](const auto &a, const auto &b) {
    return dtype_size(a.second->dtype()) > dtype_size(b.second->dtype());
  });
  std::map<std::string, std::pair<uint64_t, uint64_t>> offsets;
  WritePlan plan;
  uint64_t offset = 0;
  for (const auto &[name, t] : items) {
    offsets[*name] = {offset, offset + t->nbytes()};
    offset += t->nbytes();
    plan.order.push_back(t);
  }

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[k, v] : metadata) {
      header += (first ? "" : ",") + json_quote(k, "metadata key") + ":" + json_quote(v, "metadata value");
      first = false;
    }
    header += "}";
  }
  for (const auto &[name, t] : tensors) {
    if (header.size() > 1)
      header += ",";
    header += json_quote(name, "tensor name") + ":{\"dtype\":\"" + safetensors_dtype_name(t.dtype()) +
              "\",\"shape\":[";
    for (size_t i = 0; i < t.shape().size(); ++i)
      header += (i ? "," : "") + std::to_string(t.shape()[i]);
    const auto &[b, e] = offsets[name];
    header += "],\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
  }
  header += "}";
  // The spec allows trailing spaces; they put the data section on 8 bytes.
  header.append((8 - header.size() % 8) % 8, ' ');

  uint64_t n = header.size();
  plan.prefix.resize(8);
  for (int i = 0; i < 8; ++i)
    plan.prefix[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  plan.prefix += header;
  return plan;
}

} // namespace

std::string safetensors_dtype_name(DType dtype) { return std::string(dtype_info(dtype).safetensors_name); }

std::optional<DType> parse_safetensors_dtype(std::string_view name) { return dtype_from_safetensors_name(name); }

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const std::byte> owner, const std::byte *data,
                                       size_t size, std::string name) {
  auto header_error = [&](const std::string &msg) { return Error(ErrorCode::SafetensorsHeader, msg, name); };
  if (size < 8)
    throw header_error("file is " + std::to_string(size) +
                       " bytes long; a safetensors file starts with an 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<uint8_t>(data[i])) << (8 * i);
  if (n > size - 8)
    throw header_error("header length " + std::to_string(n) + " goes past the end of the file (" +
                       std::to_string(size) + " bytes)");
  if (n > kMaxHeaderSize)
    throw header_error("header length " + std::to_string(n) + " is over the " +
                       std::to_string(kMaxHeaderSize) + "-byte limit");

  const char *text = reinterpret_cast<const char *>(data + 8);
  // Duplicate keys (nlohmann keeps the last silently, which would hide a
  // second tensor of the same name) and nesting depth, before any DOM.
  for (const JsonIssue &issue : check_json_structure(std::string_view(text, static_cast<size_t>(n)))) {
    if (issue.kind == JsonIssue::Kind::too_deep)
      throw header_error("header " + issue.message + " (at " + issue.pointer() + ")");
    const std::string &key = issue.path.back();
    if (issue.path.size() == 1)
      throw Error(ErrorCode::DuplicateTensorName,
                  (key == "__metadata__" ? std::string("'__metadata__'") : "tensor '" + key + "'") +
                      " appears more than once in the header",
                  name);
    const std::string &top_key = issue.path.front();
    throw header_error((top_key == "__metadata__" ? std::string("__metadata__: ") : tensor_prefix(top_key)) +
                       "key '" + key + "' appears more than once");
  }
  json header;
  try {
    header = json::parse(text, text + n);
  } catch (const json::exception &e) {
    throw header_error("header is not valid JSON: " + strip_json_prefix(e.what()));
  }
  if (!header.is_object())
    throw header_error("header must be a JSON object, got " + std::string(header.type_name()));

  SafetensorsFile f;
  f.path_ = std::move(name);
  f.owner_ = std::move(owner);
  f.data_ = data;
  f.size_ = size;
  f.data_start_ = static_cast<size_t>(8 + n);
  const uint64_t data_size = size - f.data_start_;

  for (const auto &[key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        throw Error(ErrorCode::SafetensorsHeader,
                    "__metadata__ must be an object of strings, got " + std::string(value.type_name()), f.path_);
      for (const auto &[mk, mv] : value.items()) {
        if (!mv.is_string())
          throw Error(ErrorCode::SafetensorsHeader,
                      "__metadata__: value of '" + mk + "' must be a string, got " + show(mv), f.path_);
        f.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    f.tensors_[key] = parse_entry(key, value, data_size, f.path_);
  }

  // Overlap check over the non-empty ranges, in order of their start.
  std::vector<std::pair<const std::string *, const TensorInfo *>> ranges;
  for (const auto &[key, info] : f.tensors_)
    if (info.data_end > info.data_begin)
      ranges.emplace_back(&key, &info);
  std::sort(ranges.begin(), ranges.end(), [](const auto &a, const auto &b) {
    return a.second->data_begin < b.second->data_begin;
  });
  const std::pair<const std::string *, const TensorInfo *> *furthest = nullptr;
  for (const auto &r : ranges) {
    if (furthest && r.second->data_begin < furthest->second->data_end) {
      auto show_range = [](const TensorInfo &i) {
        return "[" + std::to_string(i.data_begin) + ", " + std::to_string(i.data_end) + ")";
      };
      throw Error(ErrorCode::SafetensorsOffsets,
                  "tensors '" + *furthest->first + "' " + show_range(*furthest->second) + " and '" + *r.first +
                      "' " + show_range(*r.second) + " overlap",
                  f.path_);
    }
    if (!furthest || r.second->data_end > furthest->second->data_end)
      furthest = &r;
  }
  return f;
}

SafetensorsFile SafetensorsFile::open(const std::string &path) {
  InputFile file = open_for_reading(path, "safetensors file");
  size_t size = static_cast<size_t>(file.size());
  if (size < 8) {
    // Nothing to map (mmap refuses length 0); parse() words the error.
    static const std::byte empty[8] = {};
    return parse(nullptr, empty, size, path);
  }
  std::shared_ptr<const std::byte> owner = map_file_readonly(file.fd(), size);
  int err = errno; // the mapping keeps the file open after `file` closes it
  if (!owner)
    throw Error(ErrorCode::FileNotReadable, std::string("cannot map safetensors file: ") + std::strerror(err),
                path);
  const std::byte *m = owner.get();
  return parse(std::move(owner), m, size, path);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto &[name, info] : tensors_)
    out.push_back(name);
  return out;
}

const SafetensorsFile::TensorInfo &SafetensorsFile::info(const std::string &name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw Error(ErrorCode::InvalidArgument,
                "no tensor named '" + name + "' (the file has " + std::to_string(tensors_.size()) + " tensors)",
                path_);
  return it->second;
}

HostTensor SafetensorsFile::tensor(const std::string &name) const {
  const TensorInfo &ti = info(name);
  const std::byte *p = data_ + data_start_ + ti.data_begin;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(ti.dtype) == 0) {
    // Alias the mapping: the tensor's storage shares ownership of the file.
    std::shared_ptr<std::byte> alias(owner_, const_cast<std::byte *>(p));
    return HostTensor(ti.dtype, ti.shape, std::move(alias));
  }
  // Misaligned (possible in files from other writers): an aligned copy.
  HostTensor t(ti.dtype, ti.shape);
  if (t.nbytes())
    std::memcpy(t.data(), p, t.nbytes());
  return t;
}

std::string serialize_safetensors(const std::map<std::string, HostTensor> &tensors,
                                  const std::map<std::string, std::string> &metadata) {
  WritePlan plan = plan_safetensors(tensors, metadata);
  std::string out = std::move(plan.prefix);
  for (const HostTensor *t : plan.order)
    if (t->nbytes())
      out.append(reinterpret_cast<const char *>(t->data()), t->nbytes());
  return out;
}

void write_safetensors(const std::string &path, const std::map<std::string, HostTensor> &tensors,
                       const std::map<std::string, std::string> &metadata) {
  WritePlan plan = plan_safetensors(tensors, metadata);
  std::vector<std::pair<const void *, size_t>> chunks;
  chunks.emplace_back(plan.prefix.data(), plan.prefix.size());
  for (const HostTensor *t : plan.order)
    if (t->nbytes())
      chunks.emplace_back(t->data(), t->nbytes());
  write_file_atomically(path, chunks);
}

} // namespace maxc
