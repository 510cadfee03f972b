// Reductions over axes (sum mean max min prod), index reductions (argmax
// argmin) and row-wise softmax / log_softmax.
//
// Reference semantics: float reductions accumulate in double and round once
// to the result dtype; integer sum/prod wrap (two's complement, like the
// compiled code); max/min/argmax/argmin propagate NaN (the first NaN wins,
// as in NumPy). Reducing an empty axis gives sum = 0, prod = 1, mean = NaN;
// max/min/argmax/argmin of an empty axis are errors.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <cmath>
#include <limits>

namespace maxc {
using namespace ophelpers;

namespace {

enum class Reduce { sum, mean, max, min, prod };

// Normalised reduction axes; [] means every axis. A rank-0 tensor has no
// axis to name, so only [] is accepted there.
std::vector<int64_t> reduction_axes(const std::string &op, const std::vector<int64_t> &axes, int64_t rank) {
  if (rank == 0 && !axes.empty())
    fail_attr(op, "axis " + std::to_string(axes[0]) + " is out of range for rank 0");
  return normalize_axes(op, axes, rank, /*empty_means_all=*/true);
}

Shape reduced_shape(const Shape &in, const std::vector<int64_t> &axes, bool keepdims) {
  Shape out;
  size_t next = 0;
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced = next < axes.size() && axes[next] == static_cast<int64_t>(d);
    if (reduced)
      ++next;
    if (!reduced)
      out.push_back(in[d]);
    else if (keepdims)
      out.push_back(Dim(1));
  }
  return out;
}

// Refuses to reduce a static size-0 dim with an op that has no identity.
void require_nonempty_axes(const std::string &op, const TensorType &x, const std::vector<int64_t> &axes) {
  for (int64_t a : axes)
    if (x.shape[a].is_static() && x.shape[a].value() == 0)
      fail_shape(op, "cannot reduce axis " + std::to_string(a) + " of size 0 in " + x.to_string() + " (" + op +
                         " of nothing is undefined)");
}

// For each linear index of `in`, the linear index of the output element it
// reduces into (the output's element order is the same with or without
// keepdims).
std::vector<int64_t> reduction_index_map(const std::vector<int64_t> &in, const std::vector<int64_t> &axes) {
  std::vector<int64_t> kept = in;
  for (int64_t a : axes)
    kept[a] = 1;
  std::vector<int64_t> out_strides = strides_of(kept);
  for (int64_t a : axes)
    out_strides[a] = 0;
  int64_t n = numel_of(in);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(in.size(), 0);
  int64_t lin = 0;
  for (int64_t i = 0; i < n; ++i) {
    map[i] = lin;
    for (int64_t d = static_cast<int64_t>(in.size()) - 1; d >= 0; --d) {
      lin += out_strides[d];
      if (++idx[d] < in[d])
        break;
      lin -= out_strides[d] * idx[d];
      idx[d] = 0;
    }
  }
  return map;
}

// Views a tensor as [outer, n, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
  AxisView(const std::vector<int64_t> &shape, int64_t axis) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < axis ? outer : d == axis ? n : inner) *= shape[d];
  }
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * n + k) * inner + i; }
};

OpDef reduce_op(const std::string &name, const std::string &summary, Reduce kind) {
  OpDef def;
  def.name = name;
  def.traits = OpTrait::reduction;
  def.summary = summary;
  def.attrs = {
      {"axes", AttrKind::ints, AttrValue(std::vector<int64_t>{}), "axes to reduce (may be negative); [] = all"},
      {"keepdims", AttrKind::boolean, AttrValue(false), "keep reduced axes as size-1 dims"}};
  def.infer = [name, kind](const InferContext &c) {
    const TensorType &x = c.operands[0];
    if (kind == Reduce::mean)
      require_float(name, x);
    else
      require_numeric(name, x);
    std::vector<int64_t> axes = reduction_axes(name, c.attrs.get_ints("axes"), x.rank());
    if (kind == Reduce::max || kind == Reduce::min)
      require_nonempty_axes(name, x, axes);
    return std::vector<TensorType>{
        TensorType(x.dtype, reduced_shape(x.shape, axes, c.attrs.get_bool("keepdims")), x.device)};
  };
  def.reference = [name, kind](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    HostTensor out = c.make_result();
    std::vector<int64_t> axes = reduction_axes(name, c.attrs.get_ints("axes"), x.rank());
    std::vector<int64_t> map = reduction_index_map(x.shape(), axes);
    int64_t count = 1; // elements per output
    for (int64_t a : axes)
      count *= x.shape()[a];
    const int64_t n_out = out.numel();
    if (count == 0 && n_out > 0 && (kind == Reduce::max || kind == Reduce::min))
      fail_shape(name, "cannot reduce an axis of size 0 in " + describe(x));

    if (is_float(x.dtype())) {
      const double inf = std::numeric_limits<double>::infinity();
      double init = kind == Reduce::prod ? 1.0 : kind == Reduce::max ? -inf : kind == Reduce::min ? inf : 0.0;
      std::vector<double> acc(static_cast<size_t>(n_out), init);
      for (int64_t i = 0; i < x.numel(); ++i) {
        double v = x.get_f64(i);
        double &a = acc[map[i]];
        switch (kind) {
        case Reduce::sum:
        case Reduce::mean:
          a += v;
          break;
        case Reduce::prod:
          a *= v;
          break;
        // Once NaN, `a` stays NaN: every comparison with it is false.
        case Reduce::max:
          if (std::isnan(v) || v > a)
            a = v;
          break;
        case Reduce::min:
          if (std::isnan(v) || v < a)
            a = v;
          break;
        }
      }
      for (int64_t o = 0; o < n_out; ++o)
        out.set_f64(o, kind == Reduce::mean ? acc[o] / static_cast<double>(count) : acc[o]);
    } else {
      // uint64 arithmetic wraps without UB; set_i64 narrows with wrapping.
      std::vector<int64_t> acc(static_cast<size_t>(n_out));
      std::vector<bool> seen(kind == Reduce::max || kind == Reduce::min ? n_out : 0, false);
      for (int64_t o = 0; o < n_out; ++o)
        acc[o] = kind == Reduce::prod ? 1 : 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t v = x.get_i64(i);
        int64_t &a = acc[map[i]];
        switch (kind) {
        case Reduce::sum:
        case Reduce::mean:
          a = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(v));
          break;
        case Reduce::prod:
          a = static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(v));
          break;
        case Reduce::max:
        case Reduce::min: {
          int64_t kv = int_order_key(x.dtype(), v), ka = int_order_key(x.dtype(), a);
          if (!seen[map[i]] || (kind == Reduce::max ? kv > ka : kv < ka))
            a = v;
          seen[map[i]] = true;
          break;
        }
        }
      }
      for (int64_t o = 0; o < n_out; ++o)
        out.set_i64(o, acc[o]);
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef arg_op(const std::string &name, const std::string &summary, bool is_max) {
  OpDef def;
  def.name = name;
  def.traits = OpTrait::reduction | OpTrait::index_result;
  def.summary = summary;
  def.attrs = {{"axis", AttrKind::integer, AttrValue(int64_t{-1}), "axis to search (may be negative)"},
               {"keepdims", AttrKind::boolean, AttrValue(false), "keep the searched axis as a size-1 dim"}};
  def.infer = [name](const InferContext &c) {
    const TensorType &x = c.operands[0];
    require_numeric(name, x);
    require_min_rank(name, x, 1);
    int64_t axis = normalize_axis(name, c.attrs.get_int("axis"), x.rank());
    require_nonempty_axes(name, x, {axis});
    return std::vector<TensorType>{
        TensorType(DType::i64, reduced_shape(x.shape, {axis}, c.attrs.get_bool("keepdims")), x.device)};
  };
  def.reference = [name, is_max](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    HostTensor out = c.make_result();
    int64_t axis = normalize_axis(name, c.attrs.get_int("axis"), x.rank());
    AxisView v(x.shape(), axis);
    if (v.n == 0 && out.numel() > 0)
      fail_shape(name, "cannot search an axis of size 0 in " + describe(x));
    bool floating = is_float(x.dtype());
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        int64_t best = 0;
        if (floating) {
          double bv = x.get_f64(v.at(o, 0, i));
          for (int64_t k = 1; k < v.n && !std::isnan(bv); ++k) {
            double e = x.get_f64(v.at(o, k, i));
            if (std::isnan(e) || (is_max ? e > bv : e < bv)) // strict: ties keep the first
              best = k, bv = e;
          }
        } else {
          int64_t bv = int_order_key(x.dtype(), x.get_i64(v.at(o, 0, i)));
          for (int64_t k = 1; k < v.n; ++k) {
            int64_t e = int_order_key(x.dtype(), x.get_i64(v.at(o, k, i)));
            if (is_max ? e > bv : e < bv)
              best = k, bv = e;
          }
        }
        out.set_i64(o * v.inner + i, best);
      }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef softmax_op(const std::string &name, const std::string &summary, bool log) {
  OpDef def;
  def.name = name;
  def.traits = OpTrait::composite | OpTrait::rowwise;
  def.summary = summary;
  def.attrs = {{"axis", AttrKind::integer, AttrValue(int64_t{-1}), "axis to normalise over (may be negative)"}};
  def.infer = [name](const InferContext &c) {
    const TensorType &x = c.operands[0];
    require_float(name, x);
    require_min_rank(name, x, 1);
    normalize_axis(name, c.attrs.get_int("axis"), x.rank());
    return std::vector<TensorType>{x};
  };
  def.reference = [name, log](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    HostTensor out = c.make_result();
    AxisView v(x.shape(), normalize_axis(name, c.attrs.get_int("axis"), x.rank()));
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        // Subtracting the row max keeps exp() from overflowing.
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < v.n; ++k)
          m = std::fmax(m, x.get_f64(v.at(o, k, i)));
        double sum = 0;
        for (int64_t k = 0; k < v.n; ++k)
          sum += std::exp(x.get_f64(v.at(o, k, i)) - m);
        for (int64_t k = 0; k < v.n; ++k) {
          double d = x.get_f64(v.at(o, k, i)) - m;
          out.set_f64(v.at(o, k, i), log ? d - std::log(sum) : std::exp(d) / sum);
        }
      }
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_reduction_ops(OpRegistry &r) {
  r.add(reduce_op("sum", "sum over axes (integers wrap)", Reduce::sum));
  r.add(reduce_op("mean", "arithmetic mean over axes (floats only)", Reduce::mean));
  r.add(reduce_op("max", "maximum over axes (NaN propagates)", Reduce::max));
  r.add(reduce_op("min", "minimum over axes (NaN propagates)", Reduce::min));
  r.add(reduce_op("prod", "product over axes (integers wrap)", Reduce::prod));
  r.add(arg_op("argmax", "i64 index of the first maximum along an axis (NaN counts as the maximum)", true));
  r.add(arg_op("argmin", "i64 index of the first minimum along an axis (a NaN is returned first, like NumPy)", false));
  r.add(softmax_op("softmax", "exp(x - max) / sum(exp(x - max)) along an axis", false));
  r.add(softmax_op("log_softmax", "x - max - log(sum(exp(x - max))) along an axis", true));
}

namespace ops {

namespace {
Tensor reduce(const char *op, const Tensor &x, const std::vector<int64_t> &axes, bool keepdims) {
  return record_op(op, {x}, {{"axes", axes}, {"keepdims", keepdims}});
}
} // namespace

Tensor sum(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims) {
  return reduce("sum", x, axes, keepdims);
}
Tensor mean(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims) {
  return reduce("mean", x, axes, keepdims);
}
Tensor max(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims) {
  return reduce("max", x, axes, keepdims);
}
Tensor min(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims) {
  return reduce("min", x, axes, keepdims);
}
Tensor prod(const Tensor &x, const std::vector<int64_t> &axes, bool keepdims) {
  return reduce("prod", x, axes, keepdims);
}
Tensor argmax(const Tensor &x, int64_t axis, bool keepdims) {
  return record_op("argmax", {x}, {{"axis", axis}, {"keepdims", keepdims}});
}
Tensor argmin(const Tensor &x, int64_t axis, bool keepdims) {
  return record_op("argmin", {x}, {{"axis", axis}, {"keepdims", keepdims}});
}
Tensor softmax(const Tensor &x, int64_t axis) { return record_op("softmax", {x}, {{"axis", axis}}); }
Tensor log_softmax(const Tensor &x, int64_t axis) { return record_op("log_softmax", {x}, {{"axis", axis}}); }

} // namespace ops
} // namespace maxc
