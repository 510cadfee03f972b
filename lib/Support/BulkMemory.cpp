// Large compile-time buffers (BulkMemory.h): huge-page arenas, a blocked
// transpose, a sampled fingerprint.
#include "maxc/Support/BulkMemory.h"
#include "maxc/Support/FileSystem.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>
#include <sys/mman.h>

namespace maxc {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kArenaBytes = size_t(64) << 20;
constexpr size_t kSmallBlock = size_t(256) << 10; // below this: the heap

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/// One anonymous mapping, carved into blocks front to back; unmapped when
/// the last block (each holds a reference) goes.
struct Arena {
  std::byte *mapping = nullptr, *base = nullptr;
  size_t mapped = 0, size = 0, used = 0;
  ~Arena() {
    if (mapping)
      ::munmap(mapping, mapped);
  }
};

std::mutex arena_mutex;
std::weak_ptr<Arena> current_arena; // the arena new blocks are cut from, while it lives

std::shared_ptr<Arena> new_arena(size_t bytes) {
  auto arena = std::make_shared<Arena>();
  arena->size = round_up(std::max(bytes, kArenaBytes), kHugePage);
  arena->mapped = arena->size + kHugePage; // room to start on a 2 MiB boundary
  void *m = ::mmap(nullptr, arena->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return nullptr;
  arena->mapping = static_cast<std::byte *>(m);
  arena->base = reinterpret_cast<std::byte *>(round_up(reinterpret_cast<uintptr_t>(m), kHugePage));
#ifdef MADV_HUGEPAGE
  ::madvise(arena->base, arena->size, MADV_HUGEPAGE); // advice only: 4 KiB pages where refused
#endif
  return arena;
}

std::shared_ptr<std::byte> heap_block(size_t bytes) {
  void *p = std::aligned_alloc(kAlign, round_up(std::max<size_t>(bytes, 1), kAlign));
  if (!p)
    throw std::bad_alloc();
  return std::shared_ptr<std::byte>(static_cast<std::byte *>(p), [](std::byte *q) { std::free(q); });
}

} // namespace

std::shared_ptr<std::byte> allocate_bulk(size_t bytes) {
  if (bytes < kSmallBlock)
    return heap_block(bytes);
  size_t need = round_up(bytes, kAlign);
  std::lock_guard<std::mutex> lock(arena_mutex);
  std::shared_ptr<Arena> arena = current_arena.lock();
  if (!arena || arena->size - arena->used < need) {
    arena = new_arena(need);
    if (!arena)
      return heap_block(bytes);
    current_arena = arena;
  }
  std::byte *p = arena->base + arena->used;
  arena->used += need;
  return std::shared_ptr<std::byte>(std::move(arena), p); // shares the arena's ownership
}

namespace {

template <typename T>
void transpose_tile(const T *src, T *dst, int64_t rows, int64_t cols, int64_t i0, int64_t i1, int64_t j0,
                    int64_t j1, int64_t d0) {
  for (int64_t j = j0; j < j1; ++j) // destination rows in order
    for (int64_t i = i0; i < i1; ++i)
      dst[(j - d0) * rows + i] = src[i * cols + j];
}

constexpr int64_t kTile = 64;

/// Source columns [j_begin, j_end) (multiples of kTile but the last), to
/// destination rows [j_begin, j_end) of which dst holds those from d0 on.
void transpose_f32(const uint32_t *src, uint32_t *dst, int64_t rows, int64_t cols, int64_t j_begin, int64_t j_end,
                   int64_t d0) {
  constexpr int64_t kBlock = 8;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = j_begin; j0 < j_end; j0 += kTile) {
      int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(j_end, j0 + kTile);
      int64_t ib1 = i0 + (i1 - i0) / kBlock * kBlock, jb1 = j0 + (j1 - j0) / kBlock * kBlock;
      for (int64_t ib = i0; ib < ib1; ib += kBlock)
        for (int64_t jb = j0; jb < jb1; jb += kBlock) {
          uint32_t t[kBlock][kBlock];
          for (int64_t a = 0; a < kBlock; ++a)
            for (int64_t b = 0; b < kBlock; ++b)
              t[b][a] = src[(ib + a) * cols + jb + b];
          for (int64_t b = 0; b < kBlock; ++b)
            std::memcpy(dst + (jb + b - d0) * rows + ib, t[b], sizeof t[b]);
        }
      // The ragged right and bottom edges of the tile, element by element.
      transpose_tile(src, dst, rows, cols, i0, ib1, jb1, j1, d0);
      transpose_tile(src, dst, rows, cols, ib1, i1, j0, j1, d0);
    }
}

void transpose_columns(const std::byte *s, std::byte *d, int64_t rows, int64_t cols, size_t element_size,
                       int64_t j_begin, int64_t j_end, int64_t d0 = 0) {
  if (element_size == 4) {
    transpose_f32(reinterpret_cast<const uint32_t *>(s), reinterpret_cast<uint32_t *>(d), rows, cols, j_begin, j_end,
                  d0);
    return;
  }
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = j_begin; j0 < j_end; j0 += kTile)
      for (int64_t j = j0; j < std::min(j_end, j0 + kTile); ++j)
        for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i)
          std::memcpy(d + ((j - d0) * rows + i) * element_size, s + (i * cols + j) * element_size, element_size);
}

} // namespace

void transpose_matrices(const std::byte *src, std::byte *dst, int64_t batches, int64_t rows, int64_t cols,
                        size_t element_size) {
  if (rows <= 0 || cols <= 0 || batches <= 0)
    return;
  const size_t matrix = static_cast<size_t>(rows * cols) * element_size;
  // Large tensors are split by source column tiles over a few threads (each
  // writes its own destination rows: the result does not depend on the split).
  // Most of the time goes to first touches of new memory, which threads share.
  constexpr size_t kPerThread = size_t(256) << 10;
  const int64_t tiles = (cols + kTile - 1) / kTile;
  const int64_t threads = std::clamp<int64_t>(
      std::min<int64_t>(static_cast<int64_t>(matrix * batches / kPerThread), tiles),
      1, std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 8));
  auto run = [&](int64_t t) {
    int64_t j_begin = tiles * t / threads * kTile, j_end = std::min(cols, tiles * (t + 1) / threads * kTile);
    for (int64_t b = 0; b < batches; ++b)
      transpose_columns(src + b * matrix, dst + b * matrix, rows, cols, element_size, j_begin, j_end);
  };
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t)
    try {
      workers.emplace_back(run, t);
    } catch (const std::system_error &) { // no thread to be had: this one does it
      run(t);
    }
  run(0);
  for (std::thread &w : workers)
    w.join();
}

void transpose_matrix_rows(const std::byte *src, std::byte *dst, int64_t rows, int64_t cols, size_t element_size,
                           int64_t j_begin, int64_t j_end) {
  if (rows > 0 && j_begin < j_end)
    transpose_columns(src, dst, rows, cols, element_size, j_begin, j_end, j_begin);
}

uint64_t sampled_fingerprint(const void *data, size_t size) {
  constexpr size_t kSample = 1024;
  const char *p = static_cast<const char *>(data);
  std::hash<std::string_view> hash;
  uint64_t h = hash(std::string_view(reinterpret_cast<const char *>(&size), sizeof size));
  // The samples of a mapped weights file are read with pread
  // (read_mapped_bytes): touching them would fault in their pages on the
  // compile's main thread (~20 ms for a 48-layer GPT's 193 weights).
  char sample[4 * kSample];
  auto mix = [&](size_t at, size_t n) {
    read_mapped_bytes(p + at, n, sample);
    h = h * 0x9e3779b97f4a7c15ull ^ hash(std::string_view(sample, n));
  };
  if (size <= 4 * kSample) {
    mix(0, size);
    return h;
  }
  mix(0, kSample);
  mix(size / 2 - kSample / 2, kSample);
  mix(size - 2 * kSample, 2 * kSample);
  return h;
}

} // namespace maxc
