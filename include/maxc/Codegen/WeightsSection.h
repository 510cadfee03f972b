// Weights without copies: an artifact's bytes as a list of pieces (owned
// text, views of the model's tensors, zero padding), the weights blob as views
// of the graph's constants, and an ELF64 writer that appends the weights to
// the small code-only object LLVM emitted. LLVM never sees the weights: the
// code addresses them as SYMBOL + offset, and the writer defines SYMBOL at the
// start of a section it streams straight from the (mmapped) tensors.
#pragma once

#include "maxc/IR/Graph.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace maxc {

/// Bytes held as pieces in order. Views keep their storage alive (a
/// tensor's shared storage), so a ByteChunks outlives the graph it was made
/// from. Copying one copies pointers, never the bytes.
class ByteChunks {
public:
  ByteChunks() = default;
  ByteChunks(std::string bytes) { append(std::move(bytes)); } // NOLINT: strings are the common artifact
  ByteChunks(const char *bytes) : ByteChunks(std::string(bytes)) {} // NOLINT

  void append(std::string bytes);
  /// `data` stays valid as long as `keep` lives.
  void append_view(const void *data, size_t size, std::shared_ptr<const void> keep);
  void append_zeros(size_t size);
  void append(const ByteChunks &other);

  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// f(data, size) for each piece in order (zero runs in blocks of at most 64 KiB).
  void for_each(const std::function<void(const char *, size_t)> &f) const;
  /// All bytes in one string (a copy: for tests and small artifacts).
  std::string str() const;
  operator std::string() const { return str(); } // NOLINT
  bool operator==(const ByteChunks &other) const;
  bool operator!=(const ByteChunks &other) const { return !(*this == other); }

private:
  struct Piece {
    std::shared_ptr<const void> keep; // owns `data` (null for zeros)
    const char *data = nullptr;       // null: `size` zero bytes
    size_t size = 0;
  };
  std::vector<Piece> pieces_;
  uint64_t size_ = 0;
};

/// FNV-1a (64-bit) of the bytes, as fnv1a64 of str() would give.
uint64_t fnv1a64(const ByteChunks &bytes);

namespace codegen {

using ConstantOffsets = std::map<std::pair<const Graph *, std::string>, uint64_t>;

/// The weights blob of a decomposed graph as views of its constants: every
/// read constant of the root graph, then of each subgraph, in name order,
/// each 64-byte aligned (layout_constants' layout, without the copy).
/// `rewrite`, if set, may give a constant other bytes in the blob (the CPU's
/// GEMM weights packed in panel order, Cpu/GemmPanels.h); null keeps its own.
using ConstantRewrite =
    std::function<std::shared_ptr<const std::vector<float>>(const Graph &graph, const std::string &name)>;
ByteChunks weights_blob(const Graph &lowered, ConstantOffsets &offsets, const ConstantRewrite &rewrite = {});

/// Appends `weights` to `object`, a relocatable little-endian ELF64 object
/// (x86-64 or aarch64) in which `symbol` is undefined, as a read-only
/// allocated section `section` (alignment `align`, a power of two), and defines
/// `symbol` (an object of weights.size() bytes) at its start. The weights are
/// views, not copied. An object that does not reference `symbol` (no code
/// reads a weight) is returned as is. Throws maxc::Error on an object it does
/// not understand.
ByteChunks append_weights_section(std::string object, const std::string &symbol, const ByteChunks &weights,
                                  const std::string &section = ".rodata.maxc.weights", uint64_t align = 64);

} // namespace codegen

} // namespace maxc
