// Safetensors weights files: a zero-copy, memory-mapped reader and a
// deterministic writer.
//
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian
// header length N, N bytes of JSON header, then the data section. The header
// maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section) plus an optional "__metadata__"
// object of string→string.
//
// Reading: the file is mapped read-only and every tensor aliases the mapping
// (shared_ptr aliasing), so the mapping lives as long as any tensor from it and
// no bytes are copied. The spec puts the data section right after the header,
// so a file from another writer may hold a tensor at an offset that is not a
// multiple of its element size; such a tensor (and only that one) is copied
// into an aligned buffer, since HostTensor readers need aligned f32/f64/i64.
// Caveats of mapping: reading a tensor raises SIGBUS if another process
// truncates the file meanwhile, and writing to a mapped tensor's bytes faults
// (the mapping is read-only, matching HostTensor's "read-only once built").
//
// Every header error is a maxc::Error whose location() is the file and whose
// message names the tensor. Gaps between tensors and trailing bytes after the
// last one are accepted (the reference loader rejects them; maxc only needs
// each tensor's bytes to be in range and not overlap another tensor's).
#pragma once

#include "maxc/IR/DType.h"
#include "maxc/IR/HostTensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace maxc {

/// "F32", "BF16", "BOOL", ... (the safetensors spelling).
std::string safetensors_dtype_name(DType dtype);
/// Inverse of safetensors_dtype_name; nullopt for a dtype maxc does not have
/// (U8, F8_E4M3, ...) or a wrong spelling.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

class SafetensorsFile {
public:
  /// Where one tensor lives; offsets are relative to the data section.
  struct TensorInfo {
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
    uint64_t data_begin = 0;
    uint64_t data_end = 0;
  };

  /// Maps `path` read-only and validates the whole header. Throws maxc::Error
  /// (FileNotReadable, SafetensorsHeader, SafetensorsOffsets,
  /// SafetensorsDType, DuplicateTensorName).
  static SafetensorsFile open(const std::string &path);
  /// Parses `size` bytes at `data` (a whole safetensors file). `owner` keeps
  /// the bytes alive and is shared by every tensor returned; it may be empty
  /// if the caller guarantees `data` outlives them. `name` is used in errors.
  static SafetensorsFile parse(std::shared_ptr<const std::byte> owner, const std::byte *data,
                               size_t size, std::string name);

  /// The path (or the name given to parse()).
  const std::string &path() const { return path_; }
  /// Tensor names, sorted.
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }
  bool contains(const std::string &name) const { return tensors_.count(name) != 0; }
  /// dtype, shape and offsets without touching the data. Throws for an
  /// unknown name.
  const TensorInfo &info(const std::string &name) const;
  /// The tensor, aliasing the mapping when its data is aligned to its
  /// element size, else an aligned copy. Throws for an unknown name.
  HostTensor tensor(const std::string &name) const;
  /// The "__metadata__" entry (empty when absent).
  const std::map<std::string, std::string> &metadata() const { return metadata_; }

  /// The whole file's bytes and where the data section starts in them.
  const std::byte *bytes() const { return data_; }
  size_t byte_size() const { return size_; }
  size_t data_section_offset() const { return data_start_; }

private:
  SafetensorsFile() = default;

  std::string path_;
  std::shared_ptr<const std::byte> owner_;
  const std::byte *data_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// The bytes of a safetensors file holding `tensors`. Deterministic: header
/// keys are sorted ("__metadata__" first, omitted when empty), the header is
/// padded with spaces to a multiple of 8, and the data section has no gaps
/// (the reference loader rejects gaps) yet every tensor is aligned to its
/// element size: data is ordered by element size (largest first), then name.
/// Throws InvalidArgument for the reserved name "__metadata__", a name or
/// metadata text that is not UTF-8, or a tensor without storage.
std::string serialize_safetensors(const std::map<std::string, HostTensor> &tensors,
                                  const std::map<std::string, std::string> &metadata = {});

/// Writes serialize_safetensors()'s bytes to `path` atomically (a temp file
/// `path.tmp.<pid>` renamed over `path`; removed on failure), streaming the
/// tensors' bytes without building the file in memory. Throws FileWrite.
void write_safetensors(const std::string &path, const std::map<std::string, HostTensor> &tensors,
                       const std::map<std::string, std::string> &metadata = {});

} // namespace maxc
