// Large compile-time buffers without the cost of fresh memory: the
// pre-transposed weights of a model (hundreds of MB) are written once, right
// after they are allocated, and page faults on new 4 KiB pages — not the
// copying — were most of that time (issue #11, "Compile cost").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace maxc {

/// `bytes` of uninitialized, 64-byte aligned storage. Large blocks come out
/// of shared arenas of anonymous memory advised as transparent huge pages
/// (one fault per 2 MiB instead of per 4 KiB where the kernel grants them);
/// an arena is unmapped when the last block cut from it is released. Small
/// blocks come from the heap. Thread-safe.
std::shared_ptr<std::byte> allocate_bulk(size_t bytes);

/// Transposes the last two dimensions of `batches` row-major matrices of
/// `rows` x `cols` elements of `element_size` bytes: dst[b][j][i] =
/// src[b][i][j]. In 64 x 64 tiles, 4-byte elements in 8 x 8 blocks (each
/// destination row written 32 bytes at a time), so both sides stay in cache.
/// `src` and `dst` must not overlap.
void transpose_matrices(const std::byte *src, std::byte *dst, int64_t batches, int64_t rows, int64_t cols,
                        size_t element_size);

/// Rows [j_begin, j_end) of the transpose of one rows x cols matrix, the
/// same way, on this thread only: dst[j - j_begin][i] = src[i][j] (a GEMM
/// panel, or a block of a transposed weight made while it is written).
void transpose_matrix_rows(const std::byte *src, std::byte *dst, int64_t rows, int64_t cols, size_t element_size,
                           int64_t j_begin, int64_t j_end);

/// A cheap fingerprint of `size` bytes for finding candidates that may be
/// equal (the size and up to 4 KiB sampled at the start, middle and end);
/// equal bytes always give equal fingerprints, so compare the bytes of
/// candidates with equal fingerprints. Unlike a hash of every byte it costs
/// the same for a 1 GB tensor as for a small one.
uint64_t sampled_fingerprint(const void *data, size_t size);

} // namespace maxc
