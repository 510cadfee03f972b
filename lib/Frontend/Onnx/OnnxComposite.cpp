// ONNX ops with no maxc op of their own, written as exact or accurate
// compositions of core ops (so every backend runs them with no new kernel):
// the inverse trigonometric and hyperbolic functions, the signal windows
// (HannWindow, HammingWindow, BlackmanWindow), OneHot, GatherND, LRN and
// ReverseSequence; and, with what they need known at import, Compress, DFT,
// Det (up to 4x4), BitShift and Upsample (nearest); the scatters (Scatter,
// ScatterElements, ScatterND, MaxUnpool) through one-hot masks; GridSample
// (2-D) through gathers of its taps.
#include "OnnxOps.h"
#include "OnnxTensor.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>

namespace maxc::onnx_import {
namespace {

using Outs = std::vector<Tensor>;

[[noreturn]] void bad(const std::string &what) { throw Error(ErrorCode::OnnxAttribute, what); }

/// The most elements of a table computed at import (a window, DFT matrix,
/// index list): far above what the ops need, below what would exhaust memory.
constexpr int64_t kMaxTable = int64_t(1) << 26;

void check_table(int64_t a, int64_t b, const std::string &what) {
  if (a < 0 || b < 0 || (b > 0 && a > kMaxTable / b))
    throw Error(ErrorCode::OnnxUnsupportedOp, what + " would need a table of more than 2^26 elements");
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
  check_table(n, 1, node.op());
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
  if (values.rank() != 1 || static_dim(values.shape()[0], "OneHot values' length") != 2)
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
  int64_t k = static_dim(idx.shape()[q - 1], "GatherND's index tuple length");
  if (k < 1 || b + k > r)
    bad("GatherND index tuples of " + std::to_string(k) + " exceed the data's rank " + std::to_string(r) +
        " after " + std::to_string(b) + " batch dims");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < b + k; ++i)
    dims.push_back(static_dim(data.shape()[i], "a GatherND data dim"));
  for (int64_t i = 0; i < b; ++i)
    if (static_dim(idx.shape()[i], "a GatherND batch dim") != dims[i])
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
  int64_t c = static_dim(x.shape()[1], "LRN's channel dim");
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
  int64_t nb = static_dim(x.shape()[batch], "ReverseSequence's batch dim"), nt = static_dim(x.shape()[time], "its time dim");
  if (lens.rank() != 1 || static_dim(lens.shape()[0], "sequence_lens' length") != nb)
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
      n *= static_dim(d, "Compress's input dim");
    x = ops::reshape(x, {Dim(n)});
  }
  int64_t axis = flat ? 0 : axis_in(node.attr_int("axis", 0), x.rank(), "Compress axis");
  int64_t n = static_dim(x.shape()[axis], "Compress's axis");
  if (static_cast<int64_t>(cond.size()) > n)
    bad("Compress condition has " + std::to_string(cond.size()) + " elements, the axis " + std::to_string(n));
  std::vector<double> kept;
  check_table(static_cast<int64_t>(cond.size()), 1, "Compress");
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
  Tensor past = ops::greater_equal(y, sc(double(bits), y.dtype())); // compared unsigned: u64 past 2^63 too
  Tensor p = ops::gather(Tensor::from_f64(x.dtype(), {bits}, powers),
                         ops::cast(ops::where(past, sc(0, y.dtype()), y), DType::i64), 0);
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
  int64_t n = static_dim(x.shape()[r - 1], "Det's matrix size");
  if (static_dim(x.shape()[r - 2], "Det's matrix size") != n)
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
    int64_t in = static_dim(x.shape()[a], "an upsampled dim");
    auto out = static_cast<int64_t>(std::floor(static_cast<double>(in) * scales[a]));
    check_table(out, 1, "Upsample");
    std::vector<double> src;
    for (int64_t i = 0; i < out; ++i)
      src.push_back(std::min<double>(static_cast<double>(in - 1), std::floor(static_cast<double>(i) / scales[a])));
    x = ops::gather(x, Tensor::from_f64(DType::i64, {out}, src), a);
  }
  return {x};
}

/// The DFT of signals along the last axis of `re` (+ i `im`), `len` long:
/// products with cos/sin matrices. Forward: (re + i im)(cos - i sin);
/// inverse: (re + i im)(cos + i sin) / len. onesided: the first len/2 + 1
/// bins. Returns (real, imaginary), [..., bins].
std::pair<Tensor, Tensor> dft_rows(const Tensor &re, const std::optional<Tensor> &im, int64_t len, bool inverse,
                                   bool onesided) {
  int64_t k = onesided ? len / 2 + 1 : len;
  std::vector<double> c(static_cast<size_t>(len * k)), s(c.size());
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double a = 2 * pi * static_cast<double>((i * j) % len) / static_cast<double>(len);
      c[i * k + j] = std::cos(a);
      s[i * k + j] = std::sin(a);
    }
  DType dt = re.dtype();
  Tensor cm = Tensor::from_f64(dt, {len, k}, c), sm = Tensor::from_f64(dt, {len, k}, s);
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
  return {yr, yi};
}

// STFT (opset 17): frames of frame_length every frame_step samples (a
// gather of positions: constant for a static length; for a symbolic length
// the frame count is floor((length - frame) / step) + 1 and the positions an
// iota computed at run time), times the window, then their DFTs. A rank-2
// signal [batch, length] is real (ONNX Runtime accepts it).
Outs stft(const OnnxNode &node) {
  Tensor x = float_input(node);
  if (x.rank() == 2)
    x = ops::unsqueeze(x, {2});
  if (x.rank() != 3)
    bad("STFT takes a signal [batch, length, 1 or 2] or [batch, length], got " + x.type().to_string());
  const Dim length = x.shape()[1];
  int64_t comps = static_dim(x.shape()[2], "STFT's last dim");
  if (comps != 1 && comps != 2)
    bad("STFT's last dim must be 1 (real) or 2 (complex)");
  std::vector<int64_t> step = node.ints(1);
  if (step.size() != 1 || step[0] < 1)
    bad("STFT frame_step must be one integer >= 1");
  std::optional<Tensor> window;
  if (node.has(2))
    window = node.in(2);
  std::optional<int64_t> frame;
  if (window)
    frame = static_dim(window->shape()[0], "STFT's window length");
  if (node.has(3)) {
    std::vector<int64_t> fl = node.ints(3);
    if (fl.size() != 1)
      bad("STFT frame_length must be one integer");
    if (window && fl[0] != *frame)
      bad("STFT window length differs from frame_length");
    frame = fl[0];
  }
  if (!frame && !length.is_static())
    bad("STFT of a signal of symbolic length " + length.to_string() + " needs a window or a frame_length");
  if (!frame)
    frame = length.value();
  if (*frame < 1 || (length.is_static() && *frame > length.value()))
    bad("STFT frame_length " + std::to_string(*frame) + " must be in [1, " + length.to_string() + "]");
  Tensor positions;
  if (length.is_static()) {
    int64_t frames = 1 + (length.value() - *frame) / step[0];
    check_table(frames, *frame, "STFT");
    std::vector<double> at;
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t i = 0; i < *frame; ++i)
        at.push_back(static_cast<double>(f * step[0] + i));
    positions = Tensor::from_f64(DType::i64, {frames, *frame}, at);
  } else {
    Shape table{Dim::floor_div(length - Dim(*frame), Dim(step[0])) + Dim(1), Dim(*frame)};
    positions = ops::add(ops::mul(ops::iota(table, 0, DType::i64), sc(double(step[0]), DType::i64)),
                         ops::iota(table, 1, DType::i64));
  }
  check_table(*frame, *frame, "STFT");
  Tensor framed = ops::gather(x, positions, 1); // [B, F, frame, comps]
  if (window)
    framed = ops::mul(framed, ops::reshape(ops::cast(*window, x.dtype()), {Dim(1), Dim(1), Dim(*frame), Dim(1)}));
  Tensor re = ops::squeeze(ops::slice(framed, {0}, {1}, {3}), {3});
  std::optional<Tensor> im;
  if (comps == 2)
    im = ops::squeeze(ops::slice(framed, {1}, {2}, {3}), {3});
  auto [yr, yi] = dft_rows(re, im, *frame, false, node.attr_int("onesided", 1) != 0);
  return {ops::concat({ops::unsqueeze(yr, {3}), ops::unsqueeze(yi, {3})}, 3)};
}

// MelWeightMatrix (opset 17): known at import, as the ONNX reference builds it.
Outs mel_weight_matrix(const OnnxNode &node) {
  auto one = [&](size_t i, const char *what) {
    std::vector<double> v = node.reals(i);
    if (v.size() != 1)
      bad(std::string("MelWeightMatrix ") + what + " must be a scalar");
    return v[0];
  };
  auto mels = static_cast<int64_t>(one(0, "num_mel_bins")), dft_length = static_cast<int64_t>(one(1, "dft_length"));
  auto rate = static_cast<int64_t>(one(2, "sample_rate"));
  double lower = one(3, "lower_edge_hertz"), upper = one(4, "upper_edge_hertz");
  if (mels < 1 || dft_length < 1 || rate < 1 || mels > 100000 || dft_length > (int64_t(1) << 24) || !(upper > lower))
    bad("MelWeightMatrix needs num_mel_bins, dft_length, sample_rate >= 1 and upper > lower edge");
  std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(node.attr_int("output_datatype", 1)));
  if (!dtype)
    bad("MelWeightMatrix output_datatype is not supported");
  int64_t bins = dft_length / 2 + 1;
  check_table(bins, mels, "MelWeightMatrix");
  double low_mel = 2595 * std::log10(1 + lower / 700), high_mel = 2595 * std::log10(1 + upper / 700);
  double step = (high_mel - low_mel) / static_cast<double>(mels + 2);
  std::vector<int64_t> f(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * step + low_mel) / 2595) - 1);
    f[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
  }
  std::vector<double> out(static_cast<size_t>(bins * mels), 0.0);
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= bins)
      bad("MelWeightMatrix: the upper edge maps past the spectrogram's bins");
    out[j * mels + i] = v;
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t lo = f[i], center = f[i + 1], hi = f[i + 2];
    if (center == lo)
      set(center, i, 1);
    else
      for (int64_t j = lo; j <= center; ++j)
        set(j, i, static_cast<double>(j - lo) / static_cast<double>(center - lo));
    for (int64_t j = center; j < hi; ++j)
      set(j, i, static_cast<double>(hi - j) / static_cast<double>(hi - center));
  }
  return {Tensor::from_f64(*dtype, {bins, mels}, out)};
}

// ---- DFT (opset 17): products with cos/sin matrices over the signal axis ----

Outs dft(const OnnxNode &node) {
  Tensor x = float_input(node);
  int64_t r = x.rank();
  if (r < 3)
    bad("DFT takes [batch, ..., signal, 1 or 2]");
  int64_t comps = static_dim(x.shape()[r - 1], "DFT's last dim");
  if (comps != 1 && comps != 2)
    bad("DFT's last dim must be 1 (real) or 2 (complex), got " + std::to_string(comps));
  // Opset 20 moved the axis to input 2 (default -2, the signal before the
  // components).
  int64_t axis = axis_in(node.opset() >= 20 ? (node.has(2) ? node.ints(2).at(0) : -2) : node.attr_int("axis", 1), r,
                         "DFT axis");
  if (axis == 0 || axis == r - 1)
    bad("DFT axis must be a signal dim (not the batch or the last)");
  bool inverse = node.attr_int("inverse", 0) != 0, onesided = node.attr_int("onesided", 0) != 0;
  if (inverse && onesided)
    bad("DFT: inverse with onesided is not defined");
  int64_t n = static_dim(x.shape()[axis], "DFT's signal length");
  int64_t len = n;
  if (node.has(1)) {
    std::vector<int64_t> v = node.ints(1);
    if (v.size() != 1)
      bad("DFT dft_length must be one integer");
    len = v[0];
  }
  if (len < 1)
    bad("DFT dft_length must be >= 1");
  check_table(len, len, "DFT");
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
  auto [yr, yi] = dft_rows(re, im, len, inverse, onesided);
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
    n *= static_dim(d, what);
  return n;
}

/// The most passes scatter_rows_known makes: a row hit more often than this
/// by a reducing scatter goes to the masks.
constexpr size_t kMaxScatterPasses = 16;

/// scatter_rows with the rows `linear` known at import: pass p gathers each
/// row's p-th update (a constant table of update numbers) and reduces it into
/// the row where it has one, so a row hit k times is reduced k times in update
/// order (reduction "none": the last update wins). O(rows) per pass, no mask.
/// nullopt when some row is hit more than kMaxScatterPasses times.
std::optional<Tensor> scatter_rows_known(const std::string &op, const Tensor &data, const std::vector<int64_t> &linear,
                                         const Tensor &updates, const std::string &reduction) {
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    bad(op + " reduction must be none, add, mul, max or min, got '" + reduction + "'");
  int64_t t = static_dim(data.shape()[0], op + "'s data");
  std::vector<std::vector<double>> passes; // per pass and row: the update number, or -1
  std::vector<size_t> hits(static_cast<size_t>(t), 0);
  for (size_t j = 0; j < linear.size(); ++j) {
    int64_t row = linear[j];
    if (row < 0 || row >= t)
      throw Error(ErrorCode::OnnxAttribute, op + ": update " + std::to_string(j) + " addresses element " +
                                                std::to_string(row) + " of " + std::to_string(t) +
                                                " (the flattened index is out of range)");
    size_t pass = reduction == "none" ? 0 : hits[static_cast<size_t>(row)]++;
    if (pass >= kMaxScatterPasses)
      return std::nullopt;
    if (pass >= passes.size())
      passes.emplace_back(static_cast<size_t>(t), -1.0);
    passes[pass][static_cast<size_t>(row)] = static_cast<double>(j);
  }
  Shape row_shape{Dim(t)};
  for (int64_t i = 1; i < data.rank(); ++i)
    row_shape.emplace_back(1);
  Tensor out = data;
  for (const std::vector<double> &table : passes) {
    std::vector<double> index(table.size()), hit(table.size());
    bool all = true;
    for (size_t r = 0; r < table.size(); ++r) {
      index[r] = std::max(table[r], 0.0);
      hit[r] = table[r] >= 0;
      all = all && table[r] >= 0;
    }
    Tensor g = ops::gather(updates, Tensor::from_f64(DType::i64, {t}, index), 0); // [T, rest...]
    Tensor merged = reduction == "none" ? g
                    : reduction == "add" ? ops::add(out, g)
                    : reduction == "mul" ? ops::mul(out, g)
                    : reduction == "max" ? ops::maximum(out, g)
                                         : ops::minimum(out, g);
    out = all ? merged : ops::where(ops::reshape(Tensor::from_f64(DType::boolean, {t}, hit), row_shape), merged, out);
  }
  return out;
}

/// `linear`'s values when they are known at import (the node's indices
/// input `index` is known), computed by `flatten` from the indices' values.
std::optional<std::vector<int64_t>> known_rows(const OnnxNode &node, size_t index,
                                               const std::function<std::vector<int64_t>(const HostTensor &)> &flatten) {
  const Val &v = node.val(index);
  if (v.kind != Val::Kind::known && !(v.kind == Val::Kind::sym && std::all_of(v.dims.begin(), v.dims.end(), [](const Dim &d) {
                                        return d.is_static();
                                      })))
    return std::nullopt;
  return flatten(node.known(index));
}

Tensor scatter_rows(const std::string &op, const Tensor &data, const Tensor &linear, const Tensor &updates,
                    const std::string &reduction, const std::optional<std::vector<int64_t>> &known = std::nullopt) {
  if (known)
    if (std::optional<Tensor> out = scatter_rows_known(op, data, *known, updates, reduction))
      return *out;
  // The rows and the updates may be symbolic (a run-time length, a
  // NonZero's count): the masks are iotas over them. Static, their product
  // is limited; symbolic, it is what the run's dims make it.
  const Dim t = data.shape()[0], m = linear.shape()[0];
  int64_t rest = count_of(Shape(data.shape().begin() + 1, data.shape().end()), op + "'s data");
  if (t.is_static() && m.is_static() && m.value() * t.value() > kMaxScatterMask / std::max<int64_t>(rest, 1))
    throw Error(ErrorCode::OnnxUnsupportedOp, op + ": " + m.to_string() + " updates into " + t.to_string() +
                                                  " rows of " + std::to_string(rest) +
                                                  " elements is past what maxc composes with masks (2^26 elements)");
  DType dt = data.dtype();
  int64_t extra = data.rank() - 1; // trailing dims of a row
  Tensor hit = ops::equal(ops::reshape(linear, {m, Dim(1)}), ops::iota({m, t}, 1, DType::i64));
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

/// A known index into a dim of n, negatives counted from the end; out of
/// range is an error naming the op.
int64_t normalized_known(int64_t i, int64_t n, const std::string &op) {
  if (i < -n || i >= n)
    throw Error(ErrorCode::OnnxAttribute, op + ": index " + std::to_string(i) + " is outside [" +
                                              std::to_string(-n) + ", " + std::to_string(n) + ")");
  return i < 0 ? i + n : i;
}

Tensor normalized_index(const Tensor &idx, const Dim &n) {
  Tensor i = ops::cast(idx, DType::i64);
  return ops::where(ops::less(i, sc(0, DType::i64)), ops::add(i, dim_scalar(n)), i);
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
    dims.push_back(static_dim(data.shape()[d], node.op() + "'s data dim"));
  // The flat position of each update: its own coordinates, the index on `axis`.
  Tensor linear = ops::full(0, DType::i64, idx.shape());
  int64_t stride = 1;
  for (int64_t d = r - 1; d >= 0; --d) {
    Tensor coord = d == axis ? normalized_index(idx, dims[d]) : ops::iota(idx.shape(), d, DType::i64);
    linear = ops::add(linear, ops::mul(coord, sc(double(stride), DType::i64)));
    stride *= dims[d];
  }
  int64_t m = count_of(idx.shape(), node.op() + "'s indices");
  auto flatten = [&](const HostTensor &values) { // the same positions, computed at import
    std::vector<int64_t> v = values.to_i64(), out(v.size()), coord(static_cast<size_t>(r), 0);
    for (size_t e = 0; e < v.size(); ++e) {
      int64_t pos = 0;
      for (int64_t d = 0; d < r; ++d)
        pos = pos * dims[d] + (d == axis ? normalized_known(v[e], dims[d], node.op()) : coord[d]);
      out[e] = pos;
      for (int64_t d = r - 1; d >= 0 && ++coord[d] == static_dim(idx.shape()[d], "an index dim"); --d)
        coord[d] = 0; // the next element's coordinates in the indices' shape
    }
    return out;
  };
  Tensor flat = scatter_rows(node.op(), ops::reshape(data, {Dim(stride)}), ops::reshape(linear, {Dim(m)}),
                             ops::reshape(upd, {Dim(m)}), node.attr_string("reduction", "none"),
                             known_rows(node, 1, flatten));
  return {ops::reshape(flat, data.shape())};
}

Outs scatter_nd(const OnnxNode &node) {
  Tensor data = node.in(0), idx = node.in(1), upd = node.in(2);
  int64_t q = idx.rank(), r = data.rank();
  if (!is_integer(idx.dtype()) || q < 1)
    throw Error(ErrorCode::DTypeMismatch, "ScatterND indices must be integers of rank >= 1");
  int64_t k = static_dim(idx.shape()[q - 1], "ScatterND's index tuple length");
  if (k < 1 || k > r)
    bad("ScatterND index tuples of " + std::to_string(k) + " exceed the data's rank " + std::to_string(r));
  // The indexed dims and the index count may be symbolic (a signal of
  // run-time length, indices from a NonZero): strides and bounds are then
  // run-time values.
  Shape dims(data.shape().begin(), data.shape().begin() + k);
  Tensor i64 = ops::cast(idx, DType::i64);
  Shape lead(idx.shape().begin(), idx.shape().end() - 1);
  Tensor linear = ops::full(0, DType::i64, lead);
  Dim stride(1);
  for (int64_t j = k - 1; j >= 0; --j) {
    Tensor c = normalized_index(ops::squeeze(ops::slice(i64, {j}, {j + 1}, {q - 1}), {q - 1}), dims[j]);
    linear = ops::add(linear, ops::mul(c, dim_scalar(stride)));
    stride = stride * dims[j];
  }
  Dim m = shape_numel(lead);
  Shape rows{stride}, upd_rows{m};
  rows.insert(rows.end(), data.shape().begin() + k, data.shape().end());
  upd_rows.insert(upd_rows.end(), data.shape().begin() + k, data.shape().end());
  auto flatten = [&](const HostTensor &values) { // the same rows, computed at import
    std::vector<int64_t> v = values.to_i64(), out(static_cast<size_t>(m.value()));
    for (int64_t e = 0; e < m.value(); ++e) {
      int64_t pos = 0;
      for (int64_t j = 0; j < k; ++j)
        pos = pos * dims[j].value() +
              normalized_known(v[static_cast<size_t>(e * k + j)], dims[j].value(), "ScatterND");
      out[static_cast<size_t>(e)] = pos;
    }
    return out;
  };
  bool all_static = m.is_static() && stride.is_static();
  Tensor flat = scatter_rows("ScatterND", ops::reshape(data, rows), ops::reshape(linear, {m}),
                             ops::reshape(upd, upd_rows), node.attr_string("reduction", "none"),
                             all_static ? known_rows(node, 1, flatten) : std::nullopt);
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
    out.emplace_back((static_dim(x.shape()[2 + i], "a MaxUnpool input dim") - 1) * strides[i] - pads[i] - pads[sp + i] +
                     kernel[i]);
  std::vector<int64_t> grow;
  if (node.has(2)) {
    std::vector<int64_t> shape = node.ints(2);
    if (static_cast<int64_t>(shape.size()) != r)
      bad("MaxUnpool output_shape must have X's rank");
    grow.assign(2 * static_cast<size_t>(r), 0);
    for (int64_t d = 0; d < r; ++d) {
      int64_t extra = shape[d] - static_dim(out[d], "a MaxUnpool output dim");
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

// ---- GridSample (2-D): the ONNX reference's (and PyTorch's) sampling,
// coordinates computed elementwise, the taps gathered from X as rows of
// [N*H*W, C] ----

struct GridAxis {
  int64_t size;
  double lo, hi; // the borders: [-0.5, size - 0.5], or [0, size - 1] with align_corners
};

/// The ONNX reference's reflection of v into [lo, hi] (repeatedly, by the
/// near border), where v is outside.
Tensor reflect_into(const Tensor &v, double lo, double hi) {
  DType t = v.dtype();
  double range = hi - lo;
  auto fold = [&](const Tensor &dx, double near, double far) {
    Tensor n = ops::floor(ops::div(dx, sc(range, t)));
    Tensor r = ops::sub(dx, ops::mul(n, sc(range, t)));
    Tensor even = ops::equal(ops::mod(n, sc(2, t)), sc(0, t));
    double dir = near < far ? 1.0 : -1.0; // toward the inside
    return ops::where(even, ops::add(sc(near, t), ops::mul(sc(dir, t), r)), ops::sub(sc(far, t), ops::mul(sc(dir, t), r)));
  };
  Tensor below = fold(ops::sub(sc(lo, t), v), lo, hi), above = fold(ops::sub(v, sc(hi, t)), hi, lo);
  return ops::where(ops::less(v, sc(lo, t)), below, ops::where(ops::greater(v, sc(hi, t)), above, v));
}

Outs grid_sample(const OnnxNode &node) {
  Tensor x = float_input(node), grid = node.in(1);
  if (x.rank() != 4 || grid.rank() != 4)
    throw Error(ErrorCode::OnnxUnsupportedOp, "GridSample is supported in 2-D (X [N, C, H, W], grid [N, H', W', 2])");
  if (grid.dtype() != x.dtype())
    grid = ops::cast(grid, x.dtype());
  std::string mode = node.attr_string("mode", "bilinear"), padding = node.attr_string("padding_mode", "zeros");
  if (mode == "linear")
    mode = "bilinear";
  if (mode == "cubic")
    mode = "bicubic";
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    bad("GridSample mode must be bilinear, nearest or bicubic, got '" + mode + "'");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    bad("GridSample padding_mode must be zeros, border or reflection, got '" + padding + "'");
  bool align = node.attr_int("align_corners", 0) != 0;
  int64_t batch = static_dim(x.shape()[0], "GridSample's batch"), channels = static_dim(x.shape()[1], "GridSample's channels");
  int64_t h = static_dim(x.shape()[2], "GridSample's height"), w = static_dim(x.shape()[3], "GridSample's width");
  if (static_dim(grid.shape()[0], "the grid's batch") != batch || static_dim(grid.shape()[3], "the grid's last dim") != 2)
    bad("GridSample grid must be [N, H', W', 2] with X's N");
  DType t = x.dtype();
  auto axis_of = [&](int64_t size) {
    return align ? GridAxis{size, 0.0, static_cast<double>(size - 1)} : GridAxis{size, -0.5, size - 0.5};
  };
  GridAxis ax = axis_of(w), ay = axis_of(h);
  // Unnormalized coordinates, then brought inside as the padding mode says.
  auto coordinate = [&](int64_t comp, const GridAxis &a) {
    Tensor g = ops::squeeze(ops::slice(grid, {comp}, {comp + 1}, {3}), {3}); // [N, H', W']
    Tensor v = align ? ops::mul(ops::add(g, sc(1, t)), sc((a.size - 1) / 2.0, t))
                     : ops::div(ops::sub(ops::mul(ops::add(g, sc(1, t)), sc(double(a.size), t)), sc(1, t)), sc(2, t));
    if (mode == "nearest")
      v = ops::round(v); // half to even (nearbyint), as PyTorch's 2-D sampler
    Tensor out = ops::logical_or(ops::less(v, sc(a.lo, t)), ops::greater(v, sc(a.hi, t)));
    if (padding == "border")
      v = ops::where(out, ops::minimum(ops::maximum(v, sc(0, t)), sc(double(a.size - 1), t)), v);
    else if (padding == "reflection")
      v = reflect_into(v, a.lo, a.hi);
    return v;
  };
  Tensor fx = coordinate(0, ax), fy = coordinate(1, ay);
  // X as rows [N*H*W, C]; a tap is the row (n*H + y)*W + x.
  Tensor rows = ops::reshape(ops::transpose(x, {0, 2, 3, 1}), {Dim(batch * h * w), Dim(channels)});
  Tensor base = ops::mul(ops::iota(fx.shape(), 0, DType::i64), sc(double(h * w), DType::i64));
  // The pixel at integer coordinates (float tensors of whole numbers), with
  // the padding mode: zeros outside, clamped, or reflected.
  auto pixel = [&](const Tensor &py, const Tensor &px) {
    Tensor yy = py, xx = px;
    std::optional<Tensor> inside;
    if (padding == "zeros") {
      inside = ops::logical_and(
          ops::logical_and(ops::greater_equal(xx, sc(0, t)), ops::less(xx, sc(double(w), t))),
          ops::logical_and(ops::greater_equal(yy, sc(0, t)), ops::less(yy, sc(double(h), t))));
    } else if (padding == "reflection") {
      xx = ops::cast(ops::cast(reflect_into(xx, ax.lo, ax.hi), DType::i64), t); // int(): toward zero
      yy = ops::cast(ops::cast(reflect_into(yy, ay.lo, ay.hi), DType::i64), t);
    }
    xx = ops::minimum(ops::maximum(xx, sc(0, t)), sc(double(w - 1), t));
    yy = ops::minimum(ops::maximum(yy, sc(0, t)), sc(double(h - 1), t));
    Tensor idx = ops::add(base, ops::add(ops::mul(ops::cast(yy, DType::i64), sc(double(w), DType::i64)),
                                         ops::cast(xx, DType::i64)));
    Tensor v = ops::gather(rows, idx, 0); // [N, H', W', C]
    return inside ? ops::where(ops::unsqueeze(*inside, {3}), v, sc(0, t)) : v;
  };
  auto weighted = [&](const Tensor &v, const Tensor &weight) { return ops::mul(v, ops::unsqueeze(weight, {3})); };
  Tensor y;
  if (mode == "nearest") {
    y = pixel(fy, fx);
  } else {
    Tensor x0 = ops::floor(fx), y0 = ops::floor(fy);
    Tensor tx = ops::sub(fx, x0), ty = ops::sub(fy, y0);
    std::vector<Tensor> cx, cy;
    int64_t first = mode == "bilinear" ? 0 : -1, taps = mode == "bilinear" ? 2 : 4;
    if (mode == "bilinear") {
      cx = {ops::sub(sc(1, t), tx), tx};
      cy = {ops::sub(sc(1, t), ty), ty};
    } else { // Keys' cubic convolution, A = -0.75
      const double a = -0.75;
      auto cubic = [&](const Tensor &d) {
        Tensor d1 = ops::add(d, sc(1, t)), e = ops::sub(sc(1, t), d), e1 = ops::sub(sc(2, t), d);
        auto far = [&](const Tensor &z) { // ((a z - 5a) z + 8a) z - 4a
          return ops::sub(ops::mul(ops::add(ops::mul(ops::sub(ops::mul(sc(a, t), z), sc(5 * a, t)), z), sc(8 * a, t)), z),
                          sc(4 * a, t));
        };
        auto near = [&](const Tensor &z) { // ((a + 2) z - (a + 3)) z z + 1
          return ops::add(ops::mul(ops::mul(ops::sub(ops::mul(sc(a + 2, t), z), sc(a + 3, t)), z), z), sc(1, t));
        };
        return std::vector<Tensor>{far(d1), near(d), near(e), far(e1)};
      };
      cx = cubic(tx);
      cy = cubic(ty);
    }
    for (int64_t i = 0; i < taps; ++i)
      for (int64_t j = 0; j < taps; ++j) {
        Tensor v = weighted(pixel(ops::add(y0, sc(double(first + i), t)), ops::add(x0, sc(double(first + j), t))),
                            ops::mul(cy[i], cx[j]));
        y = i == 0 && j == 0 ? v : ops::add(y, v);
      }
  }
  return {ops::transpose(y, {0, 3, 1, 2})};
}

// ---- RoiAlign (opset 16), as ONNX Runtime computes it: per ROI a grid of
// sampling_ratio^2 bilinear samples per output bin, averaged (or the max of
// the weighted corners); the samples' corners gathered from X's rows ----

Outs roi_align(const OnnxNode &node) {
  Tensor x = float_input(node), rois = node.in(1), batch_idx = node.in(2);
  if (x.rank() != 4 || rois.rank() != 2 || batch_idx.rank() != 1)
    bad("RoiAlign takes X [N, C, H, W], rois [R, 4] and batch_indices [R]");
  int64_t n = static_dim(x.shape()[0], "RoiAlign's batch"), c = static_dim(x.shape()[1], "RoiAlign's channels");
  int64_t h = static_dim(x.shape()[2], "RoiAlign's height"), w = static_dim(x.shape()[3], "RoiAlign's width");
  int64_t r = static_dim(rois.shape()[0], "RoiAlign's ROI count");
  if (static_dim(rois.shape()[1], "RoiAlign's box size") != 4 || static_dim(batch_idx.shape()[0], "batch_indices") != r)
    bad("RoiAlign rois must be [R, 4] and batch_indices [R]");
  int64_t ph = node.attr_int("output_height", 1), pw = node.attr_int("output_width", 1);
  int64_t sr = node.attr_int("sampling_ratio", 0);
  double scale = node.attr_float("spatial_scale", 1.0);
  std::string mode = node.attr_string("mode", "avg"), ctm = node.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ph < 1 || pw < 1 || (mode != "avg" && mode != "max") || (ctm != "half_pixel" && ctm != "output_half_pixel"))
    bad("RoiAlign: output sizes >= 1, mode avg or max, coordinate_transformation_mode half_pixel or "
        "output_half_pixel");
  if (sr < 1)
    throw Error(ErrorCode::OnnxUnsupportedOp, "RoiAlign with sampling_ratio 0 (a grid from the run-time ROI sizes) "
                                              "is not supported; set sampling_ratio");
  check_table(ph, sr, "RoiAlign");
  check_table(pw, sr, "RoiAlign");
  bool half = ctm == "half_pixel";
  DType t = x.dtype();
  Tensor b = ops::cast(rois, t);
  auto col = [&](int64_t i) { // rois[:, i] * scale - offset, [R]
    return ops::sub(ops::mul(ops::squeeze(ops::slice(b, {i}, {i + 1}, {1}), {1}), sc(scale, t)), sc(half ? 0.5 : 0, t));
  };
  Tensor x0 = col(0), y0 = col(1), rw = ops::sub(col(2), x0), rh = ops::sub(col(3), y0);
  if (!half) {
    rw = ops::maximum(rw, sc(1, t));
    rh = ops::maximum(rh, sc(1, t));
  }
  // Sample positions in bin units: p + (i + 0.5) / sr for bin p, sample i.
  auto grid = [&](int64_t bins) {
    std::vector<double> v;
    for (int64_t p = 0; p < bins; ++p)
      for (int64_t i = 0; i < sr; ++i)
        v.push_back(static_cast<double>(p) + (static_cast<double>(i) + 0.5) / static_cast<double>(sr));
    return Tensor::from_f64(t, {1, bins * sr}, v);
  };
  auto column = [](const Tensor &v) { return ops::unsqueeze(v, {1}); }; // [R] -> [R, 1]
  Tensor ys = ops::add(column(y0), ops::mul(column(ops::div(rh, sc(double(ph), t))), grid(ph))); // [R, PH*sr]
  Tensor xs = ops::add(column(x0), ops::mul(column(ops::div(rw, sc(double(pw), t))), grid(pw))); // [R, PW*sr]
  ys = ops::unsqueeze(ys, {2}); // [R, A, 1]
  xs = ops::unsqueeze(xs, {1}); // [R, 1, B]
  Tensor valid = ops::logical_not(ops::logical_or(
      ops::logical_or(ops::less(ys, sc(-1, t)), ops::greater(ys, sc(double(h), t))),
      ops::logical_or(ops::less(xs, sc(-1, t)), ops::greater(xs, sc(double(w), t))))); // [R, A, B]
  // Low/high corners and weights along one axis, as ORT clamps them.
  auto corners = [&](Tensor v, int64_t size) {
    v = ops::maximum(v, sc(0, t));
    Tensor low = ops::floor(v);
    Tensor edge = ops::greater_equal(low, sc(double(size - 1), t));
    low = ops::where(edge, sc(double(size - 1), t), low);
    Tensor high = ops::where(edge, low, ops::add(low, sc(1, t)));
    Tensor frac = ops::where(edge, sc(0, t), ops::sub(v, low));
    return std::array<Tensor, 3>{low, high, frac};
  };
  auto [ylo, yhi, ly] = corners(ys, h);
  auto [xlo, xhi, lx] = corners(xs, w);
  Tensor rows = ops::reshape(ops::transpose(x, {0, 2, 3, 1}), {Dim(n * h * w), Dim(c)});
  Tensor base = ops::reshape(ops::mul(ops::cast(batch_idx, DType::i64), sc(double(h * w), DType::i64)),
                             {Dim(r), Dim(1), Dim(1)});
  auto tap = [&](const Tensor &yy, const Tensor &xx, const Tensor &weight) { // [R, A, B, C]
    Tensor idx = ops::add(base, ops::add(ops::mul(ops::cast(yy, DType::i64), sc(double(w), DType::i64)),
                                         ops::cast(xx, DType::i64)));
    Tensor wv = ops::where(valid, weight, sc(0, t));
    return ops::mul(ops::gather(rows, idx, 0), ops::unsqueeze(wv, {3}));
  };
  Tensor hy = ops::sub(sc(1, t), ly), hx = ops::sub(sc(1, t), lx);
  Tensor v1 = tap(ylo, xlo, ops::mul(hy, hx)), v2 = tap(ylo, xhi, ops::mul(hy, lx)),
         v3 = tap(yhi, xlo, ops::mul(ly, hx)), v4 = tap(yhi, xhi, ops::mul(ly, lx));
  Shape bins = {Dim(r), Dim(ph), Dim(sr), Dim(pw), Dim(sr), Dim(c)};
  Tensor y;
  if (mode == "avg")
    y = ops::div(ops::sum(ops::reshape(ops::add(ops::add(v1, v2), ops::add(v3, v4)), bins), {2, 4}),
                 sc(double(sr * sr), t));
  else
    y = ops::max(ops::reshape(ops::maximum(ops::maximum(v1, v2), ops::maximum(v3, v4)), bins), {2, 4});
  return {ops::transpose(y, {0, 3, 1, 2})}; // [R, PH, PW, C] -> [R, C, PH, PW]
}

const std::set<std::string> kComposite = {"Acos",       "Acosh",         "Asin",      "Asinh",         "Atan",
                                          "Atanh",      "BitShift",      "BlackmanWindow", "Compress", "DFT",
                                          "Det",        "GatherND",      "GridSample",  "MelWeightMatrix", "RoiAlign", "STFT",      "HammingWindow", "HannWindow", "LRN",
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
  if (op == "GridSample")
    return grid_sample(node);
  if (op == "STFT")
    return stft(node);
  if (op == "MelWeightMatrix")
    return mel_weight_matrix(node);
  if (op == "RoiAlign")
    return roi_align(node);
  throw Error(ErrorCode::Internal, "composite: no mapping for " + op);
}

} // namespace maxc::onnx_import
