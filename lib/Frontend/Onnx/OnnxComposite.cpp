// ONNX ops with no maxc op of their own, written as exact or accurate
// compositions of core ops (so every backend runs them with no new kernel):
// the inverse trigonometric and hyperbolic functions, the signal windows
// (HannWindow, HammingWindow, BlackmanWindow), OneHot, GatherND, LRN and
// ReverseSequence; and, with what they need known at import, Compress, DFT,
// Det (up to 4x4), BitShift and Upsample (nearest); the scatters (Scatter,
// ScatterElements, ScatterND, MaxUnpool) through one-hot masks.
#include "OnnxOps.h"
#include "OnnxTensor.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Support/Error.h"

#include <cmath>
#include <limits>
#include <set>

namespace maxc::onnx_import {
namespace {

using Outs = std::vector<Tensor>;

Tensor sc(double v, DType dtype) { return ops::scalar(v, dtype); }

[[noreturn]] void bad(const std::string &what) { throw Error(ErrorCode::OnnxAttribute, what); }

int64_t fixed(const Dim &d, const std::string &what) {
  if (!d.is_static())
    throw Error(ErrorCode::OnnxNotFoldable, what + " must be static, got '" + d.to_string() + "' (pin it with --dim)");
  return d.value();
}

int64_t axis_in(int64_t axis, int64_t rank, const std::string &what) {
  if (axis < -rank || axis >= rank)
    bad(what + " " + std::to_string(axis) + " is outside [" + std::to_string(-rank) + ", " + std::to_string(rank) + ")");
  return axis < 0 ? axis + rank : axis;
}

Tensor float_input(const OnnxNode &node) {
  Tensor x = node.in(0);
  if (!is_float(x.dtype()))
    throw Error(ErrorCode::DTypeMismatch, node.op() + " takes floats, got " + std::string(dtype_name(x.dtype())));
  return x;
}

// ---- inverse trigonometric and hyperbolic functions ----
// Built on atan, by two range reductions (|x| > 1 → π/2 - atan(1/|x|);
// above tan(π/12) → π/6 + atan((t - 1/√3) / (1 + t/√3))) to |u| ≤ 0.268,
// where the Taylor series to u^13 is within 3e-10 of atan.

Tensor atan_of(const Tensor &x) {
  DType t = x.dtype();
  const double pi = 3.14159265358979323846, k = 1.0 / std::sqrt(3.0);
  Tensor a = ops::abs(x), big = ops::greater(a, sc(1, t));
  Tensor r = ops::where(big, ops::div(sc(1, t), a), a);
  Tensor reduced = ops::greater(r, sc(0.26794919243112270647, t)); // tan(π/12)
  Tensor u = ops::where(reduced, ops::div(ops::sub(r, sc(k, t)), ops::add(sc(1, t), ops::mul(r, sc(k, t)))), r);
  Tensor u2 = ops::mul(u, u);
  // atan(u) = u (c1 + u² (c3 + u² (... + u² c13))), c_n = (-1)^((n-1)/2) / n.
  Tensor p = sc(1.0 / 13, t);
  for (int n = 11; n >= 1; n -= 2)
    p = ops::add(sc(((n - 1) / 2 % 2 == 0 ? 1.0 : -1.0) / n, t), ops::mul(u2, p));
  Tensor y = ops::add(ops::mul(u, p), ops::where(reduced, sc(pi / 6, t), sc(0, t)));
  y = ops::where(big, ops::sub(sc(pi / 2, t), y), y);
  return ops::where(ops::less(x, sc(0, t)), ops::neg(y), y);
}

/// log(1 + u), accurate for small u: log(w) * u / (w - 1) with w = 1 + u
/// (Goldberg), u itself where w rounds to 1.
Tensor log1p_of(const Tensor &u) {
  DType t = u.dtype();
  Tensor w = ops::add(sc(1, t), u);
  return ops::where(ops::equal(w, sc(1, t)), u, ops::div(ops::mul(ops::log(w), u), ops::sub(w, sc(1, t))));
}

Tensor inverse_trig(const std::string &op, const Tensor &x) {
  DType t = x.dtype();
  const double ln2 = 0.69314718055994530942, huge = 1e8; // beyond it, sqrt(x² ± 1) is |x| in f32 and f64
  Tensor one = sc(1, t);
  if (op == "Atan")
    return atan_of(x);
  if (op == "Asin") // NaN outside [-1, 1] (the sqrt)
    return atan_of(ops::div(x, ops::sqrt(ops::sub(one, ops::mul(x, x)))));
  if (op == "Acos") // 2 atan(sqrt((1 - x) / (1 + x))): accurate near 1, π at -1
    return ops::mul(sc(2, t), atan_of(ops::sqrt(ops::div(ops::sub(one, x), ops::add(one, x)))));
  if (op == "Asinh") { // sign(x) log1p(a + a² / (1 + sqrt(1 + a²)))
    Tensor a = ops::abs(x), a2 = ops::mul(a, a);
    Tensor small = log1p_of(ops::add(a, ops::div(a2, ops::add(one, ops::sqrt(ops::add(one, a2))))));
    Tensor y = ops::where(ops::greater(a, sc(huge, t)), ops::add(ops::log(a), sc(ln2, t)), small);
    return ops::where(ops::less(x, sc(0, t)), ops::neg(y), y);
  }
  if (op == "Acosh") { // log(x + sqrt(x² - 1)); NaN below 1
    Tensor y = ops::log(ops::add(x, ops::sqrt(ops::sub(ops::mul(x, x), one))));
    return ops::where(ops::greater(x, sc(huge, t)), ops::add(ops::log(x), sc(ln2, t)), y);
  }
  // Atanh: sign(x) log1p(2a / (1 - a)) / 2; ±inf at ±1, NaN beyond
  Tensor a = ops::abs(x);
  Tensor y = ops::mul(sc(0.5, t), log1p_of(ops::div(ops::mul(sc(2, t), a), ops::sub(one, a))));
  y = ops::where(ops::equal(a, one), sc(std::numeric_limits<double>::infinity(), t), y);
  return ops::where(ops::less(x, sc(0, t)), ops::neg(y), y);
}

// ---- windows (opset 17): size known at import, computed here ----

Outs window(const OnnxNode &node) {
  std::vector<int64_t> size = node.ints(0);
  if (size.size() != 1 || size[0] < 0)
    bad(node.op() + " size must be one non-negative integer");
  int64_t n = size[0];
  std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(node.attr_int("output_datatype", 1)));
  if (!dtype)
    bad(node.op() + " output_datatype " + std::to_string(node.attr_int("output_datatype", 1)) + " is not supported");
  // periodic (default): the denominator is N (one period of an N+1 window); symmetric: N - 1.
  double denom = node.attr_int("periodic", 1) ? static_cast<double>(n) : static_cast<double>(n - 1);
  const double pi = 3.14159265358979323846;
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double c = denom > 0 ? 2 * pi * static_cast<double>(i) / denom : 0;
    if (node.op() == "HannWindow")
      w[i] = 0.5 - 0.5 * std::cos(c);
    else if (node.op() == "HammingWindow")
      w[i] = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(c);
    else // BlackmanWindow
      w[i] = 0.42 - 0.5 * std::cos(c) + 0.08 * std::cos(2 * c);
  }
  return {Tensor::from_f64(*dtype, {n}, w)};
}

// ---- OneHot: where(indices == iota over the new axis, on, off) ----

Outs one_hot(const OnnxNode &node) {
  Tensor idx = node.in(0), values = node.in(2);
  std::vector<double> depth_v = node.reals(1);
  if (depth_v.size() != 1 || !(depth_v[0] >= 1) || depth_v[0] > 1e12)
    bad("OneHot depth must be one value >= 1");
  int64_t depth = static_cast<int64_t>(depth_v[0]); // a float depth is truncated (the spec casts it)
  if (values.rank() != 1 || fixed(values.shape()[0], "OneHot values' length") != 2)
    bad("OneHot values must be [off_value, on_value]");
  if (!is_integer(idx.dtype()) && !is_float(idx.dtype()))
    throw Error(ErrorCode::DTypeMismatch, "OneHot indices must be numbers");
  int64_t axis = axis_in(node.attr_int("axis", -1), idx.rank() + 1, "OneHot axis");
  Tensor i = ops::cast(idx, DType::i64); // float indices truncate, as the spec casts them
  i = ops::where(ops::less(i, sc(0, DType::i64)), ops::add(i, sc(double(depth), DType::i64)), i);
  Shape shape = idx.shape();
  shape.insert(shape.begin() + axis, Dim(depth));
  Tensor hit = ops::equal(ops::unsqueeze(i, {axis}), ops::iota(shape, axis, DType::i64));
  Tensor off = ops::reshape(ops::slice(values, {0}, {1}), Shape{}), on = ops::reshape(ops::slice(values, {1}, {2}), Shape{});
  return {ops::where(hit, on, off)};
}

// ---- GatherND: the indexed dims (and the batch dims) flattened into one,
// the index tuples into one linear index, then a gather ----

Outs gather_nd(const OnnxNode &node) {
  Tensor data = node.in(0), idx = node.in(1);
  int64_t b = node.attr_int("batch_dims", 0), q = idx.rank(), r = data.rank();
  if (q < 1 || b < 0 || b >= std::min(q, r))
    bad("GatherND batch_dims " + std::to_string(b) + " must be below both ranks (" + std::to_string(r) + ", " +
        std::to_string(q) + ")");
  if (!is_integer(idx.dtype()))
    throw Error(ErrorCode::DTypeMismatch, "GatherND indices must be integers");
  int64_t k = fixed(idx.shape()[q - 1], "GatherND's index tuple length");
  if (k < 1 || b + k > r)
    bad("GatherND index tuples of " + std::to_string(k) + " exceed the data's rank " + std::to_string(r) +
        " after " + std::to_string(b) + " batch dims");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < b + k; ++i)
    dims.push_back(fixed(data.shape()[i], "a GatherND data dim"));
  for (int64_t i = 0; i < b; ++i)
    if (fixed(idx.shape()[i], "a GatherND batch dim") != dims[i])
      bad("GatherND batch dim " + std::to_string(i) + " differs between data and indices");
  // linear = Σ_batch iota_i * stride_i + Σ_j idx[..., j] * stride_{b+j}, strides over dims.
  std::vector<int64_t> stride(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    stride[i] = stride[i + 1] * dims[i + 1];
  Tensor i64 = ops::cast(idx, DType::i64);
  Shape lead(idx.shape().begin(), idx.shape().end() - 1);
  Tensor linear = ops::full(0, DType::i64, lead);
  for (int64_t i = 0; i < b; ++i)
    linear = ops::add(linear, ops::mul(ops::iota(lead, i, DType::i64), sc(double(stride[i]), DType::i64)));
  for (int64_t j = 0; j < k; ++j) {
    Tensor c = ops::squeeze(ops::slice(i64, {j}, {j + 1}, {q - 1}), {q - 1});
    Tensor n = sc(double(dims[b + j]), DType::i64);
    c = ops::where(ops::less(c, sc(0, DType::i64)), ops::add(c, n), c);
    linear = ops::add(linear, ops::mul(c, sc(double(stride[b + j]), DType::i64)));
  }
  int64_t total = stride[0] * dims[0];
  Shape flat{Dim(total)};
  flat.insert(flat.end(), data.shape().begin() + b + k, data.shape().end());
  return {ops::gather(ops::reshape(data, flat), linear, 0)};
}

// ---- LRN: x / (bias + alpha/size · Σ_window x²)^beta over channels ----

Outs lrn(const OnnxNode &node) {
  Tensor x = float_input(node);
  if (x.rank() < 3)
    bad("LRN takes [N, C, ...] (rank >= 3)");
  int64_t size = node.attr_int("size", 0);
  if (size < 1)
    bad("LRN size must be >= 1 (it is required)");
  double alpha = node.attr_float("alpha", 1e-4), beta = node.attr_float("beta", 0.75), bias = node.attr_float("bias", 1.0);
  int64_t c = fixed(x.shape()[1], "LRN's channel dim");
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<int64_t> pads(2 * static_cast<size_t>(x.rank()), 0);
  pads[2] = before;
  pads[3] = after;
  DType t = x.dtype();
  Tensor sq = ops::pad(ops::mul(x, x), pads);
  Tensor acc = ops::slice(sq, {0}, {c}, {1});
  for (int64_t s = 1; s < size; ++s)
    acc = ops::add(acc, ops::slice(sq, {s}, {s + c}, {1}));
  Tensor base = ops::add(sc(bias, t), ops::mul(sc(alpha / static_cast<double>(size), t), acc));
  return {ops::div(x, ops::pow(base, sc(beta, t)))};
}

// ---- ReverseSequence: each batch row's first len[b] time steps reversed,
// a gather per row ----

Outs reverse_sequence(const OnnxNode &node) {
  Tensor x = node.in(0), lens = node.in(1);
  if (x.rank() < 2)
    bad("ReverseSequence takes a tensor of rank >= 2");
  int64_t time = node.attr_int("time_axis", 0), batch = node.attr_int("batch_axis", 1);
  if (!((time == 0 && batch == 1) || (time == 1 && batch == 0)))
    bad("ReverseSequence time_axis/batch_axis must be 0/1 or 1/0");
  int64_t nb = fixed(x.shape()[batch], "ReverseSequence's batch dim"), nt = fixed(x.shape()[time], "its time dim");
  if (lens.rank() != 1 || fixed(lens.shape()[0], "sequence_lens' length") != nb)
    bad("ReverseSequence sequence_lens must have one length per batch row");
  Tensor l = ops::cast(lens, DType::i64);
  Tensor steps = ops::iota({Dim(nt)}, 0, DType::i64);
  Outs rows;
  for (int64_t b = 0; b < nb; ++b) {
    Tensor lb = ops::reshape(ops::slice(l, {b}, {b + 1}), Shape{});
    Tensor src = ops::where(ops::less(steps, lb), ops::sub(ops::sub(lb, sc(1, DType::i64)), steps), steps);
    Tensor row = ops::slice(x, {b}, {b + 1}, {batch}); // the time axis keeps its place
    rows.push_back(ops::gather(row, src, time));
  }
  return {ops::concat(rows, batch)};
}

// ---- Compress: the condition known at import, a gather of the kept
// positions (a run-time condition would need a run-time length) ----

Outs compress(const OnnxNode &node) {
  Tensor x = node.in(0);
  std::vector<double> cond = node.known(1).to_f64(); // bool (or numbers: nonzero keeps)
  bool flat = !node.has_attr("axis");
  if (flat) {
    int64_t n = 1;
    for (const Dim &d : x.shape())
      n *= fixed(d, "Compress's input dim");
    x = ops::reshape(x, {Dim(n)});
  }
  int64_t axis = flat ? 0 : axis_in(node.attr_int("axis", 0), x.rank(), "Compress axis");
  int64_t n = fixed(x.shape()[axis], "Compress's axis");
  if (static_cast<int64_t>(cond.size()) > n)
    bad("Compress condition has " + std::to_string(cond.size()) + " elements, the axis " + std::to_string(n));
  std::vector<double> kept;
  for (size_t i = 0; i < cond.size(); ++i)
    if (cond[i] != 0)
      kept.push_back(static_cast<double>(i));
  return {ops::gather(x, Tensor::from_f64(DType::i64, {static_cast<int64_t>(kept.size())}, kept), axis)};
}

// ---- BitShift: x * 2^y or x / 2^y, 2^y looked up (0 for shifts past the width) ----

Outs bit_shift(const OnnxNode &node) {
  Tensor x = node.in(0), y = node.in(1);
  if (!is_integer(x.dtype()) || is_signed(x.dtype()) || y.dtype() != x.dtype())
    throw Error(ErrorCode::DTypeMismatch, "BitShift takes two unsigned integer tensors of one dtype");
  std::string direction = node.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    bad("BitShift direction must be LEFT or RIGHT, got '" + direction + "'");
  int64_t bits = static_cast<int64_t>(dtype_size(x.dtype())) * 8;
  std::vector<double> powers;
  for (int64_t i = 0; i < bits; ++i)
    powers.push_back(std::ldexp(1.0, static_cast<int>(i)));
  Tensor shift = ops::cast(y, DType::i64);
  Tensor past = ops::greater_equal(shift, sc(double(bits), DType::i64));
  Tensor p = ops::gather(Tensor::from_f64(x.dtype(), {bits}, powers),
                         ops::where(past, sc(0, DType::i64), shift), 0);
  Tensor r = direction == "LEFT" ? ops::mul(x, p) : ops::div(x, p); // unsigned: wraps, floors
  return {ops::where(past, sc(0, x.dtype()), r)};
}

// ---- Det: cofactor expansion along the first row (matrices up to 4x4) ----

Tensor det_of(const std::vector<std::vector<Tensor>> &m) {
  size_t n = m.size();
  if (n == 1)
    return m[0][0];
  if (n == 2)
    return ops::sub(ops::mul(m[0][0], m[1][1]), ops::mul(m[0][1], m[1][0]));
  Tensor acc;
  for (size_t j = 0; j < n; ++j) {
    std::vector<std::vector<Tensor>> minor;
    for (size_t i = 1; i < n; ++i) {
      std::vector<Tensor> row;
      for (size_t k = 0; k < n; ++k)
        if (k != j)
          row.push_back(m[i][k]);
      minor.push_back(row);
    }
    Tensor term = ops::mul(m[0][j], det_of(minor));
    acc = j == 0 ? term : (j % 2 ? ops::sub(acc, term) : ops::add(acc, term));
  }
  return acc;
}

Outs det(const OnnxNode &node) {
  Tensor x = float_input(node);
  int64_t r = x.rank();
  if (r < 2)
    bad("Det takes [..., M, M]");
  int64_t n = fixed(x.shape()[r - 1], "Det's matrix size");
  if (fixed(x.shape()[r - 2], "Det's matrix size") != n)
    bad("Det takes square matrices");
  if (n < 1 || n > 4)
    throw Error(ErrorCode::OnnxUnsupportedOp, "Det of " + std::to_string(n) + "x" + std::to_string(n) +
                                                  " matrices is not supported (cofactor expansion: up to 4x4)");
  std::vector<std::vector<Tensor>> m(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      m[i].push_back(ops::squeeze(ops::slice(x, {i, j}, {i + 1, j + 1}, {r - 2, r - 1}), {r - 2, r - 1}));
  return {det_of(m)};
}

// ---- Upsample (opsets 7-9, deprecated by Resize): nearest, integer-free
// scales known at import; out[i] = in[floor(i / scale)] per axis ----

Outs upsample(const OnnxNode &node) {
  Tensor x = node.in(0);
  std::string mode = node.attr_string("mode", "nearest");
  if (mode != "nearest")
    throw Error(ErrorCode::OnnxUnsupportedOp, "Upsample mode '" + mode + "' is not supported (nearest is; Resize "
                                              "covers linear)");
  std::vector<double> scales = node.num_inputs() > 1 ? node.reals(1) : node.attr_floats("scales");
  if (static_cast<int64_t>(scales.size()) != x.rank())
    bad("Upsample needs one scale per dim");
  for (int64_t a = 0; a < x.rank(); ++a) {
    if (!(scales[a] >= 1) || scales[a] > 1e6)
      bad("Upsample scales must be >= 1");
    if (scales[a] == 1)
      continue;
    int64_t in = fixed(x.shape()[a], "an upsampled dim");
    auto out = static_cast<int64_t>(std::floor(static_cast<double>(in) * scales[a]));
    std::vector<double> src;
    for (int64_t i = 0; i < out; ++i)
      src.push_back(std::min<double>(static_cast<double>(in - 1), std::floor(static_cast<double>(i) / scales[a])));
    x = ops::gather(x, Tensor::from_f64(DType::i64, {out}, src), a);
  }
  return {x};
}

// ---- DFT (opset 17): products with cos/sin matrices over the signal axis ----

Outs dft(const OnnxNode &node) {
  Tensor x = float_input(node);
  int64_t r = x.rank();
  if (r < 3)
    bad("DFT takes [batch, ..., signal, 1 or 2]");
  int64_t comps = fixed(x.shape()[r - 1], "DFT's last dim");
  if (comps != 1 && comps != 2)
    bad("DFT's last dim must be 1 (real) or 2 (complex), got " + std::to_string(comps));
  int64_t axis = axis_in(node.attr_int("axis", 1), r, "DFT axis");
  if (axis == 0 || axis == r - 1)
    bad("DFT axis must be a signal dim (not the batch or the last)");
  bool inverse = node.attr_int("inverse", 0) != 0, onesided = node.attr_int("onesided", 0) != 0;
  if (inverse && onesided)
    bad("DFT: inverse with onesided is not defined");
  int64_t n = fixed(x.shape()[axis], "DFT's signal length");
  int64_t len = n;
  if (node.has(1))
    len = node.ints(1).at(0);
  if (len < 1)
    bad("DFT dft_length must be >= 1");
  // The signal axis moved just before the components: [..., n, comps].
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r - 1; ++i)
    if (i != axis)
      perm.push_back(i);
  perm.push_back(axis);
  perm.push_back(r - 1);
  Tensor t = ops::transpose(x, perm);
  if (len < n)
    t = ops::slice(t, {0}, {len}, {r - 2});
  else if (len > n) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(r), 0);
    pads[2 * (r - 2) + 1] = len - n;
    t = ops::pad(t, pads);
  }
  Tensor re = ops::squeeze(ops::slice(t, {0}, {1}, {r - 1}), {r - 1});
  std::optional<Tensor> im;
  if (comps == 2)
    im = ops::squeeze(ops::slice(t, {1}, {2}, {r - 1}), {r - 1});
  int64_t k = onesided ? len / 2 + 1 : len;
  std::vector<double> c(static_cast<size_t>(len * k)), s(c.size());
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double a = 2 * pi * static_cast<double>((i * j) % len) / static_cast<double>(len);
      c[i * k + j] = std::cos(a);
      s[i * k + j] = std::sin(a);
    }
  DType dt = x.dtype();
  Tensor cm = Tensor::from_f64(dt, {len, k}, c), sm = Tensor::from_f64(dt, {len, k}, s);
  // forward: (re + i im)(cos - i sin); inverse: (re + i im)(cos + i sin) / len.
  double sg = inverse ? 1.0 : -1.0;
  Tensor yr = ops::matmul(re, cm), yi = ops::mul(sc(sg, dt), ops::matmul(re, sm));
  if (im) {
    yr = ops::sub(yr, ops::mul(sc(sg, dt), ops::matmul(*im, sm)));
    yi = ops::add(yi, ops::matmul(*im, cm));
  }
  if (inverse) {
    yr = ops::div(yr, sc(double(len), dt));
    yi = ops::div(yi, sc(double(len), dt));
  }
  Tensor y = ops::concat({ops::unsqueeze(yr, {r - 1}), ops::unsqueeze(yi, {r - 1})}, r - 1);
  std::vector<int64_t> back(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i)
    back[perm[i]] = i;
  return {ops::transpose(y, back)};
}

// ---- Scatters: one-hot masks. `linear` [M] indexes the rows of `data`
// [T, rest...]; `updates` [M, rest...]. Masks of M x T x rest elements, so
// for modest sizes only (a scatter kernel would be the general answer). ----

constexpr int64_t kMaxScatterMask = int64_t(1) << 26;

int64_t count_of(const Shape &shape, const std::string &what) {
  int64_t n = 1;
  for (const Dim &d : shape)
    n *= fixed(d, what);
  return n;
}

Tensor scatter_rows(const std::string &op, const Tensor &data, const Tensor &linear, const Tensor &updates,
                    const std::string &reduction) {
  int64_t t = fixed(data.shape()[0], op + "'s data"), m = fixed(linear.shape()[0], op + "'s updates");
  int64_t rest = count_of(Shape(data.shape().begin() + 1, data.shape().end()), op + "'s data");
  if (m * t > kMaxScatterMask / std::max<int64_t>(rest, 1))
    throw Error(ErrorCode::OnnxUnsupportedOp, op + ": " + std::to_string(m) + " updates into " + std::to_string(t) +
                                                  " rows of " + std::to_string(rest) +
                                                  " elements is past what maxc composes with masks (2^26 elements)");
  DType dt = data.dtype();
  int64_t extra = data.rank() - 1; // trailing dims of a row
  Tensor hit = ops::equal(ops::reshape(linear, {Dim(m), Dim(1)}), ops::iota({Dim(m), Dim(t)}, 1, DType::i64));
  Tensor any = ops::greater(ops::sum(ops::cast(hit, DType::i64), {0}), sc(0, DType::i64)); // [T]
  std::vector<int64_t> tail_axes, row_axes;
  for (int64_t i = 0; i < extra; ++i) {
    tail_axes.push_back(2 + i);
    row_axes.push_back(1 + i);
  }
  Tensor hit3 = extra ? ops::unsqueeze(hit, tail_axes) : hit;      // [M, T, 1...]
  Tensor any2 = extra ? ops::unsqueeze(any, row_axes) : any;       // [T, 1...]
  Tensor upd3 = ops::unsqueeze(updates, {1});                      // [M, 1, rest...]
  Tensor data3 = ops::unsqueeze(data, {0});                        // [1, T, rest...]: the identity of max/min
  if (reduction == "none" || reduction == "add") {
    Tensor contrib = ops::sum(ops::where(hit3, upd3, sc(0, dt)), {0});
    return reduction == "add" ? ops::add(data, contrib) : ops::where(any2, contrib, data);
  }
  if (reduction == "mul")
    return ops::mul(data, ops::prod(ops::where(hit3, upd3, sc(1, dt)), {0}));
  if (reduction == "max")
    return ops::maximum(data, ops::max(ops::where(hit3, upd3, data3), {0}));
  if (reduction == "min")
    return ops::minimum(data, ops::min(ops::where(hit3, upd3, data3), {0}));
  bad(op + " reduction must be none, add, mul, max or min, got '" + reduction + "'");
}

Tensor normalized_index(const Tensor &idx, int64_t n) {
  Tensor i = ops::cast(idx, DType::i64);
  return ops::where(ops::less(i, sc(0, DType::i64)), ops::add(i, sc(double(n), DType::i64)), i);
}

Outs scatter_elements(const OnnxNode &node) {
  Tensor data = node.in(0), idx = node.in(1), upd = node.in(2);
  int64_t r = data.rank();
  if (idx.rank() != r || upd.rank() != r || idx.shape() != upd.shape())
    bad(node.op() + ": indices and updates must have one shape, of the data's rank");
  if (!is_integer(idx.dtype()))
    throw Error(ErrorCode::DTypeMismatch, node.op() + " indices must be integers");
  int64_t axis = axis_in(node.attr_int("axis", 0), r, node.op() + " axis");
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < r; ++d)
    dims.push_back(fixed(data.shape()[d], node.op() + "'s data dim"));
  // The flat position of each update: its own coordinates, the index on `axis`.
  Tensor linear = ops::full(0, DType::i64, idx.shape());
  int64_t stride = 1;
  for (int64_t d = r - 1; d >= 0; --d) {
    Tensor coord = d == axis ? normalized_index(idx, dims[d]) : ops::iota(idx.shape(), d, DType::i64);
    linear = ops::add(linear, ops::mul(coord, sc(double(stride), DType::i64)));
    stride *= dims[d];
  }
  int64_t m = count_of(idx.shape(), node.op() + "'s indices");
  Tensor flat = scatter_rows(node.op(), ops::reshape(data, {Dim(stride)}), ops::reshape(linear, {Dim(m)}),
                             ops::reshape(upd, {Dim(m)}), node.attr_string("reduction", "none"));
  return {ops::reshape(flat, data.shape())};
}

Outs scatter_nd(const OnnxNode &node) {
  Tensor data = node.in(0), idx = node.in(1), upd = node.in(2);
  int64_t q = idx.rank(), r = data.rank();
  if (!is_integer(idx.dtype()) || q < 1)
    throw Error(ErrorCode::DTypeMismatch, "ScatterND indices must be integers of rank >= 1");
  int64_t k = fixed(idx.shape()[q - 1], "ScatterND's index tuple length");
  if (k < 1 || k > r)
    bad("ScatterND index tuples of " + std::to_string(k) + " exceed the data's rank " + std::to_string(r));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < k; ++d)
    dims.push_back(fixed(data.shape()[d], "ScatterND's data dim"));
  Tensor i64 = ops::cast(idx, DType::i64);
  Shape lead(idx.shape().begin(), idx.shape().end() - 1);
  Tensor linear = ops::full(0, DType::i64, lead);
  int64_t stride = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    Tensor c = normalized_index(ops::squeeze(ops::slice(i64, {j}, {j + 1}, {q - 1}), {q - 1}), dims[j]);
    linear = ops::add(linear, ops::mul(c, sc(double(stride), DType::i64)));
    stride *= dims[j];
  }
  int64_t m = count_of(lead, "ScatterND's indices");
  Shape rows{Dim(stride)}, upd_rows{Dim(m)};
  rows.insert(rows.end(), data.shape().begin() + k, data.shape().end());
  upd_rows.insert(upd_rows.end(), data.shape().begin() + k, data.shape().end());
  Tensor flat = scatter_rows("ScatterND", ops::reshape(data, rows), ops::reshape(linear, {Dim(m)}),
                             ops::reshape(upd, upd_rows), node.attr_string("reduction", "none"));
  return {ops::reshape(flat, data.shape())};
}

// MaxUnpool: MaxPool's values put back at their (whole-tensor flat) Indices.
Outs max_unpool(const OnnxNode &node) {
  Tensor x = float_input(node), idx = node.in(1);
  int64_t r = x.rank();
  if (r < 3 || idx.shape() != x.shape())
    bad("MaxUnpool takes X [N, C, ...] and Indices of X's shape");
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape"), strides = node.attr_ints("strides"),
                       pads = node.attr_ints("pads");
  size_t sp = static_cast<size_t>(r - 2);
  if (kernel.size() != sp)
    bad("MaxUnpool kernel_shape needs one size per spatial dim");
  strides.resize(sp, 1);
  pads.resize(2 * sp, 0);
  // The indices address the shape MaxPool's input had (the default); a
  // larger output_shape pads that result, half of the extra before (as the
  // ONNX reference does).
  Shape out = {x.shape()[0], x.shape()[1]};
  for (size_t i = 0; i < sp; ++i)
    out.emplace_back((fixed(x.shape()[2 + i], "a MaxUnpool input dim") - 1) * strides[i] - pads[i] - pads[sp + i] +
                     kernel[i]);
  std::vector<int64_t> grow;
  if (node.has(2)) {
    std::vector<int64_t> shape = node.ints(2);
    if (static_cast<int64_t>(shape.size()) != r)
      bad("MaxUnpool output_shape must have X's rank");
    grow.assign(2 * static_cast<size_t>(r), 0);
    for (int64_t d = 0; d < r; ++d) {
      int64_t extra = shape[d] - fixed(out[d], "a MaxUnpool output dim");
      if (extra < 0 || (d < 2 && extra != 0))
        bad("MaxUnpool output_shape " + std::to_string(shape[d]) + " at dim " + std::to_string(d) +
            " is below the unpooled size " + out[d].to_string() + " (or changes N or C)");
      grow[2 * d] = extra / 2;
      grow[2 * d + 1] = extra - extra / 2;
    }
  }
  int64_t t = count_of(out, "MaxUnpool's output"), m = count_of(x.shape(), "MaxUnpool's input");
  Tensor flat = scatter_rows("MaxUnpool", ops::full(0, x.dtype(), {Dim(t)}),
                             normalized_index(ops::reshape(idx, {Dim(m)}), t), ops::reshape(x, {Dim(m)}), "none");
  Tensor y = ops::reshape(flat, out);
  return {grow.empty() ? y : ops::pad(y, grow)};
}

const std::set<std::string> kComposite = {"Acos",       "Acosh",         "Asin",      "Asinh",         "Atan",
                                          "Atanh",      "BitShift",      "BlackmanWindow", "Compress", "DFT",
                                          "Det",        "GatherND",      "HammingWindow", "HannWindow", "LRN",
                                          "MaxUnpool",  "OneHot",        "ReverseSequence", "Scatter", "ScatterElements",
                                          "ScatterND",  "Upsample"};

} // namespace

bool is_composite_op(const std::string &op) { return kComposite.count(op) != 0; }

std::vector<Tensor> composite(const OnnxNode &node) {
  const std::string &op = node.op();
  if (op == "Asin" || op == "Acos" || op == "Atan" || op == "Asinh" || op == "Acosh" || op == "Atanh")
    return {inverse_trig(op, float_input(node))};
  if (op == "HannWindow" || op == "HammingWindow" || op == "BlackmanWindow")
    return window(node);
  if (op == "OneHot")
    return one_hot(node);
  if (op == "GatherND")
    return gather_nd(node);
  if (op == "LRN")
    return lrn(node);
  if (op == "ReverseSequence")
    return reverse_sequence(node);
  if (op == "Compress")
    return compress(node);
  if (op == "BitShift")
    return bit_shift(node);
  if (op == "Det")
    return det(node);
  if (op == "Upsample")
    return upsample(node);
  if (op == "DFT")
    return dft(node);
  if (op == "Scatter" || op == "ScatterElements")
    return scatter_elements(node);
  if (op == "ScatterND")
    return scatter_nd(node);
  if (op == "MaxUnpool")
    return max_unpool(node);
  throw Error(ErrorCode::Internal, "composite: no mapping for " + op);
}

} // namespace maxc::onnx_import
