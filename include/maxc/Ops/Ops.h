// The functional op set (DESIGN.md §3). Every function records one op in the
// current realization context (maxc::RealizationContext::current()) and
// throws maxc::Error when there is none or the operands are invalid.
//
// Conventions: binary ops broadcast like NumPy and require equal dtypes (no
// implicit promotion: insert cast()); axes may be negative; layouts are NCHW
// with OIHW weights; linear() follows PyTorch (weight is [out, in]).
#pragma once

#include "maxc/IR/Dim.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Tensor/Tensor.h"

#include <optional>
#include <string>
#include <vector>

namespace maxc::ops {

// ---- creation ----
/// A tensor of `shape` filled with `value`.
Tensor full(double value, DType dtype, const Shape &shape = {});
/// A scalar (rank 0) of `dtype`.
Tensor scalar(double value, DType dtype);
/// Values 0, 1, ... along `axis`, broadcast over the other dims of `shape`.
Tensor iota(const Shape &shape, int64_t axis, DType dtype = DType::i64);
/// start, start+step, ... below `stop` (like numpy.arange), 1-D.
Tensor range(double start, double stop, double step = 1.0, DType dtype = DType::i64);
/// The values of `dims` (symbolic ones as bound at run time) as an integer
/// tensor of shape [dims.size()], or a scalar when `scalar` (one dim): a
/// shape computation that reaches run-time arithmetic ("arange(seq) + past").
Tensor dim_values(const Shape &dims, DType dtype = DType::i64, bool scalar = false);

// ---- elementwise unary ----
Tensor neg(const Tensor &x);
Tensor abs(const Tensor &x);
Tensor exp(const Tensor &x);
Tensor log(const Tensor &x);
Tensor sqrt(const Tensor &x);
Tensor rsqrt(const Tensor &x);
Tensor tanh(const Tensor &x);
Tensor sigmoid(const Tensor &x);
Tensor relu(const Tensor &x);
/// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor &x, const std::string &approximate = "none");
Tensor silu(const Tensor &x);
Tensor erf(const Tensor &x);
Tensor sin(const Tensor &x);
Tensor cos(const Tensor &x);
Tensor floor(const Tensor &x);
Tensor ceil(const Tensor &x);
/// Rounds half to even (like numpy.round).
Tensor round(const Tensor &x);
Tensor sign(const Tensor &x);
/// Logical not of a bool tensor.
Tensor logical_not(const Tensor &x);
Tensor cast(const Tensor &x, DType dtype);

// ---- elementwise binary (broadcasting) ----
Tensor add(const Tensor &a, const Tensor &b);
Tensor sub(const Tensor &a, const Tensor &b);
Tensor mul(const Tensor &a, const Tensor &b);
/// Float: IEEE division. Integer: truncating division (C semantics); division
/// by zero yields 0 rather than undefined behaviour.
Tensor div(const Tensor &a, const Tensor &b);
Tensor pow(const Tensor &a, const Tensor &b);
Tensor maximum(const Tensor &a, const Tensor &b);
Tensor minimum(const Tensor &a, const Tensor &b);
/// Remainder with the sign of the divisor (like numpy.mod / Python %).
Tensor mod(const Tensor &a, const Tensor &b);
Tensor equal(const Tensor &a, const Tensor &b);
Tensor not_equal(const Tensor &a, const Tensor &b);
Tensor less(const Tensor &a, const Tensor &b);
Tensor less_equal(const Tensor &a, const Tensor &b);
Tensor greater(const Tensor &a, const Tensor &b);
Tensor greater_equal(const Tensor &a, const Tensor &b);
Tensor logical_and(const Tensor &a, const Tensor &b);
Tensor logical_or(const Tensor &a, const Tensor &b);
/// cond ? a : b, broadcasting all three; cond is bool.
Tensor where(const Tensor &cond, const Tensor &a, const Tensor &b);

// ---- reductions ----
Tensor sum(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims = false);
Tensor mean(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims = false);
Tensor max(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims = false);
Tensor min(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims = false);
Tensor prod(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims = false);
/// Index (i64) of the first maximum along `axis`.
Tensor argmax(const Tensor &x, int64_t axis, bool keepdims = false);
Tensor argmin(const Tensor &x, int64_t axis, bool keepdims = false);
Tensor softmax(const Tensor &x, int64_t axis = -1);
Tensor log_softmax(const Tensor &x, int64_t axis = -1);

// ---- normalization ----
/// Normalizes over the last weight.rank() dims; bias optional.
Tensor layer_norm(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias, double eps = 1e-5);
Tensor rms_norm(const Tensor &x, const Tensor &weight, double eps = 1e-6);
/// Inference batch norm over channel dim 1 of NCHW (or NC) input.
Tensor batch_norm(const Tensor &x, const Tensor &scale, const Tensor &bias, const Tensor &mean,
                  const Tensor &var, double eps = 1e-5);

// ---- linear algebra ----
/// Batched matmul with NumPy broadcasting of batch dims; 1-D operands are
/// not promoted (rank >= 2 required).
Tensor matmul(const Tensor &a, const Tensor &b, bool transpose_a = false, bool transpose_b = false);
/// x @ weight^T + bias, weight [out, in].
Tensor linear(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias = std::nullopt);
/// One direction of an LSTM/GRU/RNN after its input projection: the
/// `recurrence` op (operands, attributes, results: maxc/Ops/Recurrence.h).
std::vector<Tensor> recurrence(const std::vector<Tensor> &operands, const Attrs &attrs);

// ---- convolution and pooling (NCHW) ----
struct Conv2dOptions {
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0}; // top, left, bottom, right
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
  /// Integer-valued operands whose every partial sum is exact in the dtype
  /// (the conv2d attribute `exact`): no lowering that rounds intermediates.
  bool exact = false;
};
Tensor conv2d(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias = std::nullopt,
              const Conv2dOptions &options = {});
struct ConvTranspose2dOptions {
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0}; // top, left, bottom, right
  std::vector<int64_t> output_padding{0, 0};
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
};
/// weight is [in, out/groups, kh, kw] (PyTorch layout).
Tensor conv_transpose2d(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias = std::nullopt,
                        const ConvTranspose2dOptions &options = {});
struct Pool2dOptions {
  std::vector<int64_t> kernel{2, 2};
  std::vector<int64_t> stride{};            // empty: same as kernel
  std::vector<int64_t> padding{0, 0, 0, 0}; // top, left, bottom, right
  bool count_include_pad = false;           // avg_pool2d only
};
Tensor max_pool2d(const Tensor &x, const Pool2dOptions &options = {});
Tensor avg_pool2d(const Tensor &x, const Pool2dOptions &options = {});
/// Mean over H and W, keeping them as size-1 dims: [N,C,1,1].
Tensor global_avg_pool2d(const Tensor &x);

// ---- shape ops ----
/// One dim may be -1, inferred by exact division of the element count
/// ([batch,seq,256] → [-1,256] gives [batch*seq,256]).
Tensor reshape(const Tensor &x, const Shape &shape);
/// Permutes dims; an empty perm reverses them.
Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm = {});
/// A transpose's `perm` attribute as the op reads it: empty → the dims
/// reversed, negative axes wrapped. Throws maxc::Error (InvalidAttribute)
/// unless it permutes [0, rank). (Every transpose of a verified graph has
/// a valid one.)
std::vector<int64_t> normalize_perm(const std::vector<int64_t> &perm, int64_t rank);
Tensor permute(const Tensor &x, const std::vector<int64_t> &perm);
Tensor broadcast_to(const Tensor &x, const Shape &shape);
/// Removes the given size-1 dims (all size-1 dims when empty).
Tensor squeeze(const Tensor &x, const std::vector<int64_t> &axes = {});
/// Inserts size-1 dims at the given positions of the result.
Tensor unsqueeze(const Tensor &x, const std::vector<int64_t> &axes);
Tensor concat(const std::vector<Tensor> &xs, int64_t axis);
/// Splits along `axis` into pieces of the given sizes.
std::vector<Tensor> split(const Tensor &x, const std::vector<int64_t> &sizes, int64_t axis);
/// Python-style slice per listed axis (negative indices count from the end,
/// bounds clamp; step may be negative).
Tensor slice(const Tensor &x, const std::vector<int64_t> &starts, const std::vector<int64_t> &ends,
             const std::vector<int64_t> &axes = {}, const std::vector<int64_t> &steps = {});
/// numpy.take: out shape = x.shape[:axis] + indices.shape + x.shape[axis+1:].
/// Out-of-range indices are an error in the interpreter.
Tensor gather(const Tensor &x, const Tensor &indices, int64_t axis = 0);
/// Row lookup: table [V, D], ids any integer shape → ids.shape + [D].
Tensor embedding(const Tensor &table, const Tensor &ids);
/// pads: [before_0, after_0, before_1, after_1, ...] per dim; constant mode.
Tensor pad(const Tensor &x, const std::vector<int64_t> &pads, double value = 0.0);
Tensor tile(const Tensor &x, const std::vector<int64_t> &repeats);

/// Defines the symbol `symbol` as the run-time value of the integer scalar
/// `value` (at most `bound`) and returns it as a Dim for later shapes
/// (ops::full, reshape, broadcast_to...). In a graph it records `bind_dim`
/// (GraphRealizationContext::bind_dim); eagerly it is the value itself.
Dim bind_dim(const Tensor &value, const std::string &symbol, int64_t bound);

// ---- model state (Ops/State.cpp) ----
/// The first `length` rows of the state buffer `buffer` (a graph input named
/// in the root's ModelState): a view, no copy.
Tensor buffer_prefix(const Tensor &buffer, const Dim &length);
/// Writes `rows` [n, *R] into `buffer` [capacity, *R] at rows [offset,
/// offset + n), in place, and returns its first offset + n rows (a view).
Tensor buffer_append(const Tensor &buffer, const Tensor &rows, const Dim &offset);

// ---- structural ----
/// Sums a sharded tensor across its shards (one result shard per device),
/// using the context's signal buffers.
Tensor allreduce_sum(const Tensor &sharded);
/// `if`: `then_body(captures)` when the scalar `pred` (bool or integer) is
/// nonzero at run time, else `else_body(captures)`. Each body is traced once
/// into a subgraph whose inputs are the captures (pass every outer tensor a
/// body reads; using one without passing it is a ForeignValue error); both
/// must return the same types. Needs a GraphRealizationContext (the graph
/// trace): GraphRealizationContext::cond.
std::vector<Tensor> cond(const Tensor &pred, const BranchBody &then_body, const BranchBody &else_body,
                         const std::vector<Tensor> &captures, const std::string &name = "if");
/// `loop`: i = 0, 1, ... while i < `trip` (an integer scalar) and the
/// condition holds (initially `cond`, then the body's first result):
/// `body({i (i64), cond (bool), carried..., captures...})` returns the next
/// condition and the next carried values (each of its value's type). Returns
/// the last carried values. The body is traced once (a subgraph); the trip
/// count and the condition may be known only at run time. Needs a
/// GraphRealizationContext: GraphRealizationContext::loop.
std::vector<Tensor> loop(const Tensor &trip, const Tensor &cond, const std::vector<Tensor> &carried,
                         const BranchBody &body, const std::vector<Tensor> &captures, const std::string &name = "loop");

} // namespace maxc::ops
