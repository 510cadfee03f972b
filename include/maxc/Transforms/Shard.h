// Tensor parallelism: one rank's program of a model split Megatron-style
// across `world` ranks (issue 27; docs/tensor-parallel.md).
//
// The split is decided from the ops, not from names, on the canonical graph
// (canonicalize runs first): a value is either
// replicated (every rank holds all of it) or split along one axis (rank r
// holds the r-th of `world` equal slices of each of its pieces, see
// ShardLayout). Walking the graph in order:
//   - a product (linear, matmul) of a replicated activation with a constant
//     weight is column-parallel: each rank computes its slice of the output
//     columns from its slice of the weight (and bias);
//   - a product whose activation is split along the contraction is
//     row-parallel: each rank multiplies its slice by its rows of the weight
//     and an `all_reduce` sums the partial products (the bias added after);
//   - elementwise ops, views (reshape that keeps the split axis whole or
//     splits/merges it as the outermost factor, transpose, split, concat),
//     batched matmuls over a split batch axis, row ops (softmax, norms) over
//     another axis, attention over split heads (grouped k/v heads split too,
//     or each rank's one k/v head where there are fewer k/v heads than
//     ranks) and state buffers (a KV cache: each rank keeps its heads) keep
//     the split; so does a split of the split axis into a whole number of
//     equal parts per rank (torch's repeat_interleave of k/v heads): each
//     rank holds its parts whole (Layout::owner), the others skip the ops
//     on them, and their concat in rank order is split again;
//   - any other op gets its split operands gathered (`all_gather`) and runs
//     replicated, as do the graph's outputs: the result is always the
//     single-device model's, up to the order of the partial sums.
// So a transformer's attention heads and MLP hidden units divide among the
// ranks (QKV/up/gate column-parallel, output/down row-parallel: two
// all-reduces a layer) and its LM head is vocabulary-parallel (gathered at
// the output); embeddings and norms are replicated.
//
// Subgraph bodies (deduplicated layers) are split once per definition: a
// body input that every root call binds to a constant or a graph input is
// split where its readers want it (each call site slices its own constant),
// so dedup still gives one definition per rank program. A graph input that
// a state buffer or such a body input wants split (a KV cache) becomes the
// rank's slice: the caller passes each rank its own.
//
// The program is the same for every rank but for the slices of the
// constants (and the offsets of runtime slices): the decisions depend on
// the graph and `world` only.
#pragma once

#include "maxc/IR/Graph.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace maxc {

struct ShardOptions {
  int world = 1;
  int rank = 0;
  /// Weights kept whole on every rank (`--shard PATTERN=replicated`): shell
  /// patterns (fnmatch) over constant names ("h.0.attn.qkv.weight") and the
  /// names of body parameters ("attn.qkv.weight"); a product reading one
  /// runs replicated. (Column or row follow from the graph, never forced.)
  std::vector<std::string> replicated;
};

/// What shard_graph decided, for `maxc trace --emit sharding` and the tests.
struct ShardReport {
  struct Weight {
    std::string name;     // the constant (root names: one per layer)
    std::string split;    // "column", "row", "axis N", "replicated"
    std::vector<int64_t> full, local; // shapes
    size_t pieces = 1;    // a fused weight split piece by piece (QKV)
    uint64_t local_bytes = 0, full_bytes = 0;
  };
  int world = 1;
  std::vector<Weight> weights; // every constant the program reads, in graph order
  struct Input {
    std::string name;
    int64_t axis;
    std::vector<int64_t> full, local;
  };
  std::vector<Input> inputs; // graph inputs that are per-rank slices
  /// Collective nodes per graph (root and each body definition), and how
  /// many times each runs per call of the model.
  size_t all_reduce_nodes = 0, all_gather_nodes = 0;
  size_t all_reduce_runs = 0, all_gather_runs = 0;
  /// Where a split ended in a gather before an op that cannot keep it
  /// ("attn.k: reshape: gathered").
  std::vector<std::string> gathers;

  uint64_t local_weight_bytes() const;
  uint64_t full_weight_bytes() const;
  /// A readable plan: one line per weight, then inputs, collectives and
  /// gathers.
  std::string text() const;
};

/// Rank `options.rank`'s program of `graph` split across `options.world`
/// ranks (world 1: a copy). Throws maxc::Error (InvalidArgument) for a bad
/// world or rank.
std::unique_ptr<Graph> shard_graph(const Graph &graph, const ShardOptions &options, ShardReport *report = nullptr);

/// Every rank's program, rank 0's first (`report`: rank 0's; the decisions
/// are the same for every rank).
std::vector<std::unique_ptr<Graph>> shard_graph_ranks(const Graph &graph, int world, ShardReport *report = nullptr,
                                                      const std::vector<std::string> &replicated = {});

/// Rank `rank`'s slice of `whole` along `axis` (a graph input the program
/// takes split: ShardReport::inputs), as the caller passes it.
HostTensor rank_slice(const HostTensor &whole, int64_t axis, int rank, int world);

/// The inputs of every rank, from the whole model's `inputs`: each split
/// input sliced (rank_slice), the others shared. Throws InputMismatch when
/// a split axis does not divide among the ranks.
std::vector<std::vector<HostTensor>> rank_inputs(const Graph &whole, const std::vector<std::unique_ptr<Graph>> &ranks,
                                                 const std::vector<HostTensor> &inputs);

} // namespace maxc
