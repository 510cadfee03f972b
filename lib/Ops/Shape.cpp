// Shape ops: reshape, transpose, broadcast_to, squeeze/unsqueeze, concat,
// split, slice, gather, embedding, pad, tile.
//
// Every reference kernel moves whole elements with memcpy (never through
// double), so every dtype is copied bit-exactly: i64 beyond 2^53, NaN
// payloads, bool bytes.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace maxc {
using namespace ophelpers;

namespace {

using Sizes = std::vector<int64_t>;

std::string ints_to_string(const Sizes &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// ---- kernel helpers ----

// A new tensor of `out_shape` whose element at multi-index i is src's element
// at offset + sum_d i[d] * strides[d] (element strides; 0 broadcasts,
// negative walks backwards). Covers transpose, broadcast, slice and tile.
HostTensor strided_copy(const HostTensor &src, const Sizes &out_shape, int64_t offset, const Sizes &strides) {
  HostTensor out(src.dtype(), out_shape);
  const int64_t n = out.numel();
  if (n == 0)
    return out;
  const size_t es = dtype_size(src.dtype());
  const std::byte *in = src.data();
  std::byte *dst = out.data();
  if (out_shape.empty()) {
    std::memcpy(dst, in + offset * es, es);
    return out;
  }
  const size_t rank = out_shape.size();
  const int64_t inner = out_shape.back(), inner_stride = strides.back();
  const int64_t rows = n / inner;
  Sizes idx(rank - 1, 0);
  int64_t pos = offset;
  for (int64_t r = 0; r < rows; ++r) {
    if (inner_stride == 1) {
      std::memcpy(dst, in + pos * es, static_cast<size_t>(inner) * es);
      dst += inner * es;
    } else {
      for (int64_t k = 0; k < inner; ++k, dst += es)
        std::memcpy(dst, in + (pos + k * inner_stride) * es, es);
    }
    // Advance the outer multi-index, keeping `pos` in step.
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      pos += strides[d];
      if (++idx[d] < out_shape[d])
        break;
      pos -= strides[d] * out_shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

int64_t product(const Sizes &s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= s[i];
  return n;
}

std::vector<HostTensor> one(HostTensor t) { return std::vector<HostTensor>{std::move(t)}; }
std::vector<TensorType> one(TensorType t) { return std::vector<TensorType>{std::move(t)}; }

// ---- reshape ----

OpDef reshape_op() {
  OpDef def;
  def.name = "reshape";
  def.traits = OpTrait::shape | OpTrait::strided;
  def.summary = "same elements in row-major order, new shape (one dim may be -1)";
  def.attrs = {{"shape", AttrKind::shape, std::nullopt, "target shape; one static -1 is inferred"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    const Shape &target = c.attrs.get_shape("shape");
    int64_t infer_at = -1;
    Dim known(1);
    for (size_t i = 0; i < target.size(); ++i) {
      const Dim &d = target[i];
      if (d.is_static() && d.value() == -1) {
        if (infer_at >= 0)
          fail_attr("reshape", "only one dim of the target shape " + shape_to_string(target) + " may be -1");
        infer_at = static_cast<int64_t>(i);
        continue;
      }
      if (d.is_static() && d.value() < 0)
        fail_attr("reshape", "target shape " + shape_to_string(target) + " has a negative dim");
      known = known * d;
    }
    const Dim numel = shape_numel(x.shape);
    Shape out = target;
    if (infer_at >= 0) {
      // Exact polynomial division: [batch,seq,256] -> [-1,256] gives batch*seq.
      std::optional<Dim> q = numel.exact_div(known);
      if (!q)
        fail_shape("reshape", "cannot reshape " + shape_to_string(x.shape) + " into " + shape_to_string(target) +
                                  ": the -1 dim cannot be inferred (" + numel.to_string() +
                                  " elements are not an exact multiple of " + known.to_string() + ")");
      out[infer_at] = *q;
    }
    if (shape_numel(out) != numel)
      fail_shape("reshape", "cannot reshape " + shape_to_string(x.shape) + " into " + shape_to_string(target) +
                                " (" + numel.to_string() + " vs " + shape_numel(out).to_string() + " elements)");
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) { return one(c.operands[0].reshaped(c.result_shapes[0])); };
  return def;
}

// ---- transpose ----

OpDef transpose_op() {
  OpDef def;
  def.name = "transpose";
  def.traits = OpTrait::shape | OpTrait::strided;
  def.summary = "permutes dims (result dim i = input dim perm[i])";
  def.attrs = {{"perm", AttrKind::ints, AttrValue(Sizes{}), "permutation; empty reverses the dims"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    Sizes perm = ops::normalize_perm(c.attrs.get_ints("perm"), x.rank());
    Shape out;
    for (int64_t p : perm)
      out.push_back(x.shape[p]);
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    Sizes perm = ops::normalize_perm(c.attrs.get_ints("perm"), x.rank());
    Sizes in_strides = x.strides(), strides;
    for (int64_t p : perm)
      strides.push_back(in_strides[p]);
    return one(strided_copy(x, c.result_shapes[0], 0, strides));
  };
  return def;
}

// ---- broadcast_to ----

OpDef broadcast_to_op() {
  OpDef def;
  def.name = "broadcast_to";
  def.traits = OpTrait::shape;
  def.summary = "broadcasts to a target shape with NumPy rules";
  def.attrs = {{"shape", AttrKind::shape, std::nullopt, "target shape"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    const Shape &target = c.attrs.get_shape("shape");
    for (const Dim &d : target)
      if (d.is_static() && d.value() < 0)
        fail_attr("broadcast_to", "target shape " + shape_to_string(target) + " has a negative dim");
    if (x.rank() > static_cast<int64_t>(target.size()))
      fail_shape("broadcast_to", "cannot broadcast " + shape_to_string(x.shape) + " to the lower-rank shape " +
                                     shape_to_string(target));
    size_t offset = target.size() - x.shape.size();
    for (size_t i = 0; i < x.shape.size(); ++i) {
      const Dim &d = x.shape[i];
      if (d != target[i + offset] && !(d.is_static() && d.value() == 1))
        fail_shape("broadcast_to", "cannot broadcast " + shape_to_string(x.shape) + " to " +
                                       shape_to_string(target) + " (input dim " + std::to_string(i) + " is " +
                                       d.to_string() + ", target is " + target[i + offset].to_string() + ")");
    }
    return one(TensorType(x.dtype, target, x.device));
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    const Sizes &out = c.result_shapes[0];
    Sizes in_strides = x.strides(), strides(out.size(), 0);
    size_t offset = out.size() - x.shape().size();
    for (size_t i = 0; i < x.shape().size(); ++i)
      strides[i + offset] = x.shape()[i] == 1 ? 0 : in_strides[i];
    return one(strided_copy(x, out, 0, strides));
  };
  return def;
}

// ---- squeeze / unsqueeze ----

OpDef squeeze_op() {
  OpDef def;
  def.name = "squeeze";
  def.traits = OpTrait::shape | OpTrait::strided;
  def.summary = "removes size-1 dims";
  def.attrs = {{"axes", AttrKind::ints, AttrValue(Sizes{}), "dims to remove; empty: every static size-1 dim"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    Sizes axes_attr = c.attrs.get_ints("axes");
    std::vector<bool> drop(x.shape.size(), false);
    if (axes_attr.empty()) {
      for (size_t i = 0; i < x.shape.size(); ++i)
        drop[i] = x.shape[i].is_static() && x.shape[i].value() == 1;
    } else {
      for (int64_t a : normalize_axes("squeeze", axes_attr, x.rank(), false)) {
        const Dim &d = x.shape[a];
        if (!d.is_static())
          fail_shape("squeeze", "cannot squeeze axis " + std::to_string(a) + " of " + shape_to_string(x.shape) +
                                    ": dim '" + d.to_string() + "' is symbolic, not a static 1");
        if (d.value() != 1)
          fail_shape("squeeze", "cannot squeeze axis " + std::to_string(a) + " of " + shape_to_string(x.shape) +
                                    ": its size is " + d.to_string() + ", not 1");
        drop[a] = true;
      }
    }
    Shape out;
    for (size_t i = 0; i < x.shape.size(); ++i)
      if (!drop[i])
        out.push_back(x.shape[i]);
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) { return one(c.operands[0].reshaped(c.result_shapes[0])); };
  return def;
}

OpDef unsqueeze_op() {
  OpDef def;
  def.name = "unsqueeze";
  def.traits = OpTrait::shape | OpTrait::strided;
  def.summary = "inserts size-1 dims at positions of the result";
  def.attrs = {{"axes", AttrKind::ints, std::nullopt, "positions in the result (negative counts from its end)"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    Sizes axes_attr = c.attrs.get_ints("axes");
    int64_t out_rank = x.rank() + static_cast<int64_t>(axes_attr.size());
    std::vector<bool> is_new(static_cast<size_t>(out_rank), false);
    for (int64_t a : normalize_axes("unsqueeze", axes_attr, out_rank, false))
      is_new[a] = true;
    Shape out;
    size_t next = 0;
    for (int64_t i = 0; i < out_rank; ++i)
      out.push_back(is_new[i] ? Dim(1) : x.shape[next++]);
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) { return one(c.operands[0].reshaped(c.result_shapes[0])); };
  return def;
}

// ---- concat / split ----

OpDef concat_op() {
  OpDef def;
  def.name = "concat";
  def.traits = OpTrait::shape;
  def.summary = "joins tensors along an axis";
  def.min_operands = 1;
  def.max_operands = -1;
  def.attrs = {{"axis", AttrKind::integer, AttrValue(int64_t{0}), "joining axis"}};
  def.infer = [](const InferContext &c) {
    const TensorType &first = c.operands[0];
    require_same_dtype("concat", c.operands);
    require_same_device("concat", c.operands);
    require_min_rank("concat", first, 1, "operand 0");
    int64_t axis = normalize_axis("concat", c.attrs.get_int("axis"), first.rank());
    Shape out = first.shape;
    for (size_t k = 1; k < c.operands.size(); ++k) {
      const TensorType &t = c.operands[k];
      if (t.rank() != first.rank())
        fail_shape("concat", "operand " + std::to_string(k) + " " + t.to_string() + " has rank " +
                                 std::to_string(t.rank()) + ", operand 0 " + first.to_string() + " has rank " +
                                 std::to_string(first.rank()));
      for (int64_t d = 0; d < first.rank(); ++d)
        if (d != axis && t.shape[d] != first.shape[d])
          fail_shape("concat", "operand " + std::to_string(k) + " " + t.to_string() + " differs from operand 0 " +
                                   first.to_string() + " in dim " + std::to_string(d) + " (only axis " +
                                   std::to_string(axis) + " may differ)");
      out[axis] = out[axis] + t.shape[axis];
    }
    return one(TensorType(first.dtype, out, first.device));
  };
  def.reference = [](const ReferenceContext &c) {
    HostTensor out = c.make_result();
    int64_t axis = normalize_axis("concat", c.attrs.get_int("axis"), out.rank());
    const size_t es = dtype_size(out.dtype());
    const int64_t outer = product(out.shape(), 0, axis);
    std::byte *dst = out.data();
    // Row-major: each outer index holds one contiguous chunk per operand.
    for (int64_t o = 0; o < outer; ++o)
      for (const HostTensor &x : c.operands) {
        size_t chunk = static_cast<size_t>(product(x.shape(), axis, x.shape().size())) * es;
        std::memcpy(dst, x.data() + o * chunk, chunk);
        dst += chunk;
      }
    return one(out);
  };
  return def;
}

OpDef split_op() {
  OpDef def;
  def.name = "split";
  def.traits = OpTrait::shape | OpTrait::strided;
  def.summary = "splits along an axis into pieces of given sizes (one result per piece)";
  def.attrs = {{"sizes", AttrKind::ints, std::nullopt, "piece sizes; must sum to the (static) axis size"},
               {"axis", AttrKind::integer, AttrValue(int64_t{0}), "split axis"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    require_min_rank("split", x, 1);
    int64_t axis = normalize_axis("split", c.attrs.get_int("axis"), x.rank());
    Sizes sizes = c.attrs.get_ints("sizes");
    if (sizes.empty())
      fail_attr("split", "sizes must not be empty");
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0)
        fail_attr("split", "sizes " + ints_to_string(sizes) + " contain a negative size");
      total += s;
    }
    const Dim &d = x.shape[axis];
    if (!d.is_static())
      fail_shape("split", "cannot split axis " + std::to_string(axis) + " of " + x.to_string() + ": dim '" +
                              d.to_string() + "' is symbolic");
    if (total != d.value())
      fail_shape("split", "sizes " + ints_to_string(sizes) + " sum to " + std::to_string(total) + " but axis " +
                              std::to_string(axis) + " of " + x.to_string() + " has size " + d.to_string());
    std::vector<TensorType> out;
    for (int64_t s : sizes) {
      Shape shape = x.shape;
      shape[axis] = Dim(s);
      out.emplace_back(x.dtype, shape, x.device);
    }
    return out;
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    int64_t axis = normalize_axis("split", c.attrs.get_int("axis"), x.rank());
    const size_t es = dtype_size(x.dtype());
    const int64_t outer = product(x.shape(), 0, axis);
    std::vector<HostTensor> outs;
    for (size_t i = 0; i < c.result_types.size(); ++i)
      outs.push_back(c.make_result(i));
    const std::byte *src = x.data();
    for (int64_t o = 0; o < outer; ++o)
      for (HostTensor &y : outs) {
        size_t chunk = static_cast<size_t>(product(y.shape(), axis, y.shape().size())) * es;
        std::memcpy(y.data() + o * chunk, src, chunk);
        src += chunk;
      }
    return outs;
  };
  return def;
}

// ---- slice ----

// Python slice bounds on one axis of static size `n`.
struct SliceRange {
  int64_t start = 0, step = 1, length = 0;
};

SliceRange python_slice(int64_t start, int64_t end, int64_t step, int64_t n) {
  auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
  SliceRange r;
  r.step = step;
  if (start < 0)
    start += n; // cannot overflow: start < 0 and n >= 0
  if (end < 0)
    end += n;
  if (step > 0) {
    start = clamp(start, 0, n);
    end = clamp(end, 0, n);
    r.length = end > start ? (end - start - 1) / step + 1 : 0; // no overflow for huge steps
  } else {
    start = clamp(start, -1, n - 1);
    end = clamp(end, -1, n - 1);
    r.length = start > end ? (start - end - 1) / -step + 1 : 0;
  }
  r.start = start;
  return r;
}

struct SliceSpec {
  Sizes starts, ends, axes, steps;
};

// Validates the attributes against `rank`; axes normalised, steps filled.
SliceSpec slice_spec(const Attrs &attrs, int64_t rank) {
  SliceSpec s{attrs.get_ints("starts"), attrs.get_ints("ends"), attrs.get_ints("axes"), attrs.get_ints("steps")};
  size_t n = s.starts.size();
  if (s.ends.size() != n)
    fail_attr("slice", "starts " + ints_to_string(s.starts) + " and ends " + ints_to_string(s.ends) +
                           " must have the same length");
  if (s.axes.empty())
    for (size_t i = 0; i < n; ++i)
      s.axes.push_back(static_cast<int64_t>(i));
  if (s.steps.empty())
    s.steps.assign(n, 1);
  if (s.axes.size() != n || s.steps.size() != n)
    fail_attr("slice", "axes and steps must have one entry per start (" + std::to_string(n) + ")");
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = normalize_axis("slice", s.axes[i], rank);
    if (seen[a])
      fail_attr("slice", "axis " + std::to_string(a) + " is sliced twice");
    seen[a] = true;
    s.axes[i] = a;
    if (s.steps[i] == 0 || s.steps[i] == std::numeric_limits<int64_t>::min()) // -step must not overflow
      fail_attr("slice", "step must be non-zero and above INT64_MIN (axis " + std::to_string(a) + ")");
  }
  return s;
}

// Ends at or above this mean "to the end" (INT64_MAX and friends).
constexpr int64_t kSliceToEnd = std::numeric_limits<int64_t>::max() / 2;

OpDef slice_op() {
  OpDef def;
  def.name = "slice";
  def.traits = OpTrait::shape | OpTrait::strided;
  def.summary = "Python-style strided slice along listed axes";
  def.attrs = {{"starts", AttrKind::ints, std::nullopt, "start per listed axis (negative counts from the end)"},
               {"ends", AttrKind::ints, std::nullopt, "exclusive end per axis; INT64_MAX means to the end"},
               {"axes", AttrKind::ints, AttrValue(Sizes{}), "sliced axes; empty: 0..len(starts)-1"},
               {"steps", AttrKind::ints, AttrValue(Sizes{}), "step per axis (non-zero); empty: all 1"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    SliceSpec s = slice_spec(c.attrs, x.rank());
    Shape out = x.shape;
    for (size_t i = 0; i < s.axes.size(); ++i) {
      const Dim &d = x.shape[s.axes[i]];
      if (!d.is_static()) {
        // The length of a partial slice of a symbolic dim is not a polynomial.
        if (s.starts[i] != 0 || s.ends[i] < kSliceToEnd || s.steps[i] != 1)
          fail_shape("slice", "axis " + std::to_string(s.axes[i]) + " of " + x.to_string() + " has symbolic dim '" +
                                  d.to_string() + "': only the full range (start 0, end INT64_MAX, step 1) "
                                  "can be sliced, got start " + std::to_string(s.starts[i]) + ", end " +
                                  std::to_string(s.ends[i]) + ", step " + std::to_string(s.steps[i]));
        continue;
      }
      out[s.axes[i]] = Dim(python_slice(s.starts[i], s.ends[i], s.steps[i], d.value()).length);
    }
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    SliceSpec s = slice_spec(c.attrs, x.rank());
    Sizes in_strides = x.strides(), strides = in_strides, shape = x.shape();
    int64_t offset = 0;
    for (size_t i = 0; i < s.axes.size(); ++i) {
      int64_t a = s.axes[i];
      SliceRange r = python_slice(s.starts[i], s.ends[i], s.steps[i], x.shape()[a]);
      shape[a] = r.length;
      if (r.length > 0)
        offset += r.start * in_strides[a];
      strides[a] = r.step * in_strides[a];
    }
    return one(strided_copy(x, shape, offset, strides));
  };
  return def;
}

// ---- gather / embedding ----

// out[o, j, i] = x[o, idx[j], i] with x viewed as [outer, n, inner].
HostTensor take(const std::string &op, const HostTensor &x, const HostTensor &indices, int64_t axis,
                HostTensor out) {
  const int64_t n = x.shape()[axis];
  const int64_t outer = product(x.shape(), 0, axis);
  const int64_t inner = product(x.shape(), axis + 1, x.shape().size());
  const int64_t m = indices.numel();
  Sizes idx(static_cast<size_t>(m));
  // Indices in [-n, n) select as in ONNX Gather (negatives count from the
  // end); anything still out of range clamps to [0, n-1], exactly as the
  // compiled CPU and GPU code does (docs/ops.md, "Out-of-range indices").
  if (n == 0) { // nothing to select: every element is 0 (docs/ops.md), as in compiled code
    std::memset(out.data(), 0, static_cast<size_t>(out.numel()) * dtype_size(out.dtype()));
    return out;
  }
  for (int64_t j = 0; j < m; ++j) {
    int64_t k = indices.get_i64(j);
    int64_t w = k < 0 ? k + n : k; // k >= INT64_MIN + 0, n > 0: no overflow
    idx[j] = std::clamp<int64_t>(w, 0, n - 1);
  }
  const size_t chunk = static_cast<size_t>(inner) * dtype_size(x.dtype());
  std::byte *dst = out.data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      std::memcpy(dst, x.data() + (o * n + idx[j]) * chunk, chunk);
      dst += chunk;
    }
  return out;
}

OpDef gather_op() {
  OpDef def;
  def.name = "gather";
  def.traits = OpTrait::shape | OpTrait::indirect;
  def.summary = "numpy.take: selects entries along an axis by integer indices";
  def.min_operands = def.max_operands = 2;
  def.attrs = {{"axis", AttrKind::integer, AttrValue(int64_t{0}), "indexed axis"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0], &indices = c.operands[1];
    require_same_device("gather", c.operands);
    require_integer("gather", indices, "indices");
    require_min_rank("gather", x, 1, "data operand");
    int64_t axis = normalize_axis("gather", c.attrs.get_int("axis"), x.rank());
    Shape out(x.shape.begin(), x.shape.begin() + axis);
    out.insert(out.end(), indices.shape.begin(), indices.shape.end());
    out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) {
    int64_t axis = normalize_axis("gather", c.attrs.get_int("axis"), c.operands[0].rank());
    return one(take("gather", c.operands[0], c.operands[1], axis, c.make_result()));
  };
  return def;
}

OpDef embedding_op() {
  OpDef def;
  def.name = "embedding";
  def.traits = OpTrait::composite;
  def.summary = "row lookup: table [V, D], integer ids -> ids.shape + [D]";
  def.min_operands = def.max_operands = 2;
  def.infer = [](const InferContext &c) {
    const TensorType &table = c.operands[0], &ids = c.operands[1];
    require_same_device("embedding", c.operands);
    require_rank("embedding", table, 2, "table");
    require_integer("embedding", ids, "ids");
    Shape out = ids.shape;
    out.push_back(table.shape[1]);
    return one(TensorType(table.dtype, out, table.device));
  };
  def.reference = [](const ReferenceContext &c) {
    return one(take("embedding", c.operands[0], c.operands[1], 0, c.make_result()));
  };
  return def;
}

// ---- pad ----

void check_pad_value(const TensorType &x, double v) {
  if (is_float(x.dtype))
    return;
  // Integer and bool fills must be representable exactly.
  bool ok = std::isfinite(v) && std::trunc(v) == v;
  if (is_bool(x.dtype))
    ok = ok && (v == 0 || v == 1);
  else if (ok)
    ok = HostTensor::scalar(x.dtype, v).get_f64(0) == v;
  if (!ok)
    fail_attr("pad", "value " + attr_to_string(v) + " is not representable in " + x.to_string());
}

OpDef pad_op() {
  OpDef def;
  def.name = "pad";
  def.traits = OpTrait::shape;
  def.summary = "constant padding (negative pads crop)";
  def.attrs = {{"pads", AttrKind::ints, std::nullopt, "[before_0, after_0, before_1, after_1, ...]"},
               {"value", AttrKind::real, AttrValue(0.0), "fill value"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    Sizes pads = c.attrs.get_ints("pads");
    if (static_cast<int64_t>(pads.size()) != 2 * x.rank())
      fail_attr("pad", "pads " + ints_to_string(pads) + " must have 2 entries per dim (" +
                           std::to_string(2 * x.rank()) + " for " + x.to_string() + ")");
    check_pad_value(x, c.attrs.get_real("value"));
    Shape out;
    for (int64_t d = 0; d < x.rank(); ++d) {
      Dim r = Dim(pads[2 * d]) + x.shape[d] + Dim(pads[2 * d + 1]);
      if (r.is_static() && r.value() < 0)
        fail_shape("pad", "pads " + ints_to_string(pads) + " crop dim " + std::to_string(d) + " of " +
                              x.to_string() + " below zero (" + r.to_string() + ")");
      out.push_back(r);
    }
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    const Sizes &out_shape = c.result_shapes[0];
    Sizes pads = c.attrs.get_ints("pads");
    // Symbolic dims can only be checked once bound.
    for (size_t d = 0; d < out_shape.size(); ++d)
      if (out_shape[d] < 0)
        throw Error(ErrorCode::ShapeMismatch, "pad: pads " + ints_to_string(pads) + " crop dim " +
                                                  std::to_string(d) + " of " + describe(x) + " below zero");
    HostTensor out = c.make_result();
    HostTensor fill = HostTensor::scalar(x.dtype(), c.attrs.get_real("value"));
    const size_t es = dtype_size(x.dtype());
    const int64_t n = out.numel(), rank = x.rank();
    Sizes idx(static_cast<size_t>(rank), 0), in_strides = x.strides();
    for (int64_t i = 0; i < n; ++i) {
      // out[i] = x[i - before] where that is inside x, else the fill value.
      int64_t src = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank && inside; ++d) {
        int64_t j = idx[d] - pads[2 * d];
        inside = j >= 0 && j < x.shape()[d];
        src += j * in_strides[d];
      }
      std::memcpy(out.data() + i * es, inside ? x.data() + src * es : fill.data(), es);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < out_shape[d])
          break;
        idx[d] = 0;
      }
    }
    return one(out);
  };
  return def;
}

// ---- tile ----

OpDef tile_op() {
  OpDef def;
  def.name = "tile";
  def.traits = OpTrait::shape;
  def.summary = "repeats the whole tensor along each dim";
  def.attrs = {{"repeats", AttrKind::ints, std::nullopt, "repeat count per dim (>= 0)"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    Sizes repeats = c.attrs.get_ints("repeats");
    if (static_cast<int64_t>(repeats.size()) != x.rank())
      fail_attr("tile", "repeats " + ints_to_string(repeats) + " must have one entry per dim of " + x.to_string());
    Shape out;
    for (size_t d = 0; d < repeats.size(); ++d) {
      if (repeats[d] < 0)
        fail_attr("tile", "repeats " + ints_to_string(repeats) + " contain a negative count");
      out.push_back(x.shape[d] * Dim(repeats[d]));
    }
    return one(TensorType(x.dtype, out, x.device));
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    Sizes repeats = c.attrs.get_ints("repeats");
    // View x [a, b] as [1, a, 1, b], broadcast to [ra, a, rb, b], then merge.
    Sizes in_strides = x.strides(), shape, strides;
    for (size_t d = 0; d < repeats.size(); ++d) {
      shape.insert(shape.end(), {repeats[d], x.shape()[d]});
      strides.insert(strides.end(), {0, in_strides[d]});
    }
    return one(strided_copy(x, shape, 0, strides).reshaped(c.result_shapes[0]));
  };
  return def;
}

} // namespace

void register_shape_ops(OpRegistry &r) {
  r.add(reshape_op());
  r.add(transpose_op());
  r.add(broadcast_to_op());
  r.add(squeeze_op());
  r.add(unsqueeze_op());
  r.add(concat_op());
  r.add(split_op());
  r.add(slice_op());
  r.add(gather_op());
  r.add(embedding_op());
  r.add(pad_op());
  r.add(tile_op());
}

namespace ops {

std::vector<int64_t> normalize_perm(const std::vector<int64_t> &perm_attr, int64_t rank) {
  std::vector<int64_t> perm;
  if (perm_attr.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
    return perm;
  }
  if (static_cast<int64_t>(perm_attr.size()) != rank)
    fail_attr("transpose", "perm " + ints_to_string(perm_attr) + " must have one entry per dim (rank " +
                               std::to_string(rank) + ")");
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm_attr) {
    int64_t a = normalize_axis("transpose", p, rank);
    if (seen[a])
      fail_attr("transpose", "perm " + ints_to_string(perm_attr) + " is not a permutation (axis " +
                                 std::to_string(a) + " repeats)");
    seen[a] = true;
    perm.push_back(a);
  }
  return perm;
}

Tensor reshape(const Tensor &x, const Shape &shape) { return record_op("reshape", {x}, {{"shape", shape}}); }
Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm) {
  return record_op("transpose", {x}, {{"perm", perm}});
}
Tensor permute(const Tensor &x, const std::vector<int64_t> &perm) { return transpose(x, perm); }
Tensor broadcast_to(const Tensor &x, const Shape &shape) {
  return record_op("broadcast_to", {x}, {{"shape", shape}});
}
Tensor squeeze(const Tensor &x, const std::vector<int64_t> &axes) {
  return record_op("squeeze", {x}, {{"axes", axes}});
}
Tensor unsqueeze(const Tensor &x, const std::vector<int64_t> &axes) {
  return record_op("unsqueeze", {x}, {{"axes", axes}});
}
Tensor concat(const std::vector<Tensor> &xs, int64_t axis) { return record_op("concat", xs, {{"axis", axis}}); }
std::vector<Tensor> split(const Tensor &x, const std::vector<int64_t> &sizes, int64_t axis) {
  return record_op_multi("split", {x}, {{"sizes", sizes}, {"axis", axis}});
}
Tensor slice(const Tensor &x, const std::vector<int64_t> &starts, const std::vector<int64_t> &ends,
             const std::vector<int64_t> &axes, const std::vector<int64_t> &steps) {
  return record_op("slice", {x}, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}});
}
Tensor gather(const Tensor &x, const Tensor &indices, int64_t axis) {
  return record_op("gather", {x, indices}, {{"axis", axis}});
}
Tensor embedding(const Tensor &table, const Tensor &ids) { return record_op("embedding", {table, ids}); }
Tensor pad(const Tensor &x, const std::vector<int64_t> &pads, double value) {
  return record_op("pad", {x}, {{"pads", pads}, {"value", value}});
}
Tensor tile(const Tensor &x, const std::vector<int64_t> &repeats) {
  return record_op("tile", {x}, {{"repeats", repeats}});
}

} // namespace ops
} // namespace maxc
