// Linear algebra: batched matmul (NumPy broadcasting of batch dims,
// optional transposes of the two matrix dims) and linear (x @ W^T + b).
//
// Reference semantics: floats accumulate in double (k ascending) and round
// once; integers accumulate in 64 bits with wrapping, then narrow with
// wrapping like the compiled code.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <type_traits>

namespace maxc {
using namespace ophelpers;

namespace {

// Accumulator element: double for floats, uint64 for integers (wraps without UB).
template <typename T> std::vector<T> load(const HostTensor &t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if constexpr (std::is_same_v<T, double>)
      v[i] = t.get_f64(i);
    else
      v[i] = static_cast<uint64_t>(t.get_i64(i));
  }
  return v;
}

template <typename T> void store(HostTensor &out, const std::vector<T> &v) {
  for (int64_t i = 0; i < out.numel(); ++i) {
    if constexpr (std::is_same_v<T, double>)
      out.set_f64(i, v[i]);
    else
      out.set_i64(i, static_cast<int64_t>(v[i]));
  }
}

template <typename T> HostTensor matmul_kernel(const ReferenceContext &c) {
  const HostTensor &a = c.operands[0], &b = c.operands[1];
  HostTensor out = c.make_result();
  bool ta = c.attrs.get_bool("transpose_a"), tb = c.attrs.get_bool("transpose_b");
  const auto &as = a.shape(), &bs = b.shape(), &os = out.shape();
  int64_t M = os[os.size() - 2], N = os.back();
  int64_t K = ta ? as[as.size() - 2] : as.back();
  std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2),
      out_batch(os.begin(), os.end() - 2);
  std::vector<int64_t> a_map = broadcast_index_map(a_batch, out_batch);
  std::vector<int64_t> b_map = broadcast_index_map(b_batch, out_batch);

  std::vector<T> av = load<T>(a), bv = load<T>(b), cv(static_cast<size_t>(out.numel()), T(0));
  // Each batch's operands are packed as row-major A[M,K] and B[K,N], so the
  // inner loop runs over contiguous rows whatever the transposes.
  std::vector<T> pa(static_cast<size_t>(M * K)), pb(static_cast<size_t>(K * N));
  for (size_t batch = 0; batch < a_map.size(); ++batch) {
    const T *A = av.data() + a_map[batch] * M * K;
    const T *B = bv.data() + b_map[batch] * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        pa[i * K + k] = ta ? A[k * M + i] : A[i * K + k];
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j)
        pb[k * N + j] = tb ? B[j * K + k] : B[k * N + j];
    T *C = cv.data() + static_cast<int64_t>(batch) * M * N;
    for (int64_t i = 0; i < M; ++i) {
      T *row = C + i * N;
      for (int64_t k = 0; k < K; ++k) {
        T x = pa[i * K + k];
        const T *brow = pb.data() + k * N;
        for (int64_t j = 0; j < N; ++j)
          row[j] += x * brow[j];
      }
    }
  }
  store(out, cv);
  return out;
}

OpDef matmul_op() {
  OpDef def;
  def.name = "matmul";
  def.traits = OpTrait::gemm_like;
  def.summary = "batched matrix product with NumPy-broadcast batch dims";
  def.min_operands = def.max_operands = 2;
  def.attrs = {{"transpose_a", AttrKind::boolean, AttrValue(false), "use the lhs's last two dims swapped"},
               {"transpose_b", AttrKind::boolean, AttrValue(false), "use the rhs's last two dims swapped"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "matmul";
    const TensorType &a = c.operands[0], &b = c.operands[1];
    require_same_dtype(op, c.operands);
    require_same_device(op, c.operands);
    require_numeric(op, a);
    require_min_rank(op, a, 2, "lhs");
    require_min_rank(op, b, 2, "rhs");
    bool ta = c.attrs.get_bool("transpose_a"), tb = c.attrs.get_bool("transpose_b");
    size_t ra = a.shape.size(), rb = b.shape.size();
    const Dim &m = a.shape[ta ? ra - 1 : ra - 2], &ka = a.shape[ta ? ra - 2 : ra - 1];
    const Dim &kb = b.shape[tb ? rb - 1 : rb - 2], &n = b.shape[tb ? rb - 2 : rb - 1];
    if (ka != kb)
      fail_shape(op, "contraction dims differ: lhs " + a.to_string() + (ta ? " (transposed)" : "") +
                         " has K=" + ka.to_string() + ", rhs " + b.to_string() + (tb ? " (transposed)" : "") +
                         " has K=" + kb.to_string());
    Shape shape = broadcast_shapes(op + " batch dims", Shape(a.shape.begin(), a.shape.end() - 2),
                                   Shape(b.shape.begin(), b.shape.end() - 2));
    shape.push_back(m);
    shape.push_back(n);
    return std::vector<TensorType>{TensorType(a.dtype, shape, a.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    return std::vector<HostTensor>{is_float(c.operands[0].dtype()) ? matmul_kernel<double>(c)
                                                                   : matmul_kernel<uint64_t>(c)};
  };
  return def;
}

template <typename T> HostTensor linear_kernel(const ReferenceContext &c) {
  const HostTensor &x = c.operands[0], &w = c.operands[1];
  HostTensor out = c.make_result();
  int64_t out_f = w.shape()[0], in_f = w.shape()[1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < x.shape().size(); ++d)
    rows *= x.shape()[d];
  std::vector<T> xv = load<T>(x), wv = load<T>(w), yv(static_cast<size_t>(out.numel()), T(0));
  std::vector<T> bv = c.operands.size() > 2 ? load<T>(c.operands[2]) : std::vector<T>(out_f, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = xv.data() + r * in_f;
    for (int64_t o = 0; o < out_f; ++o) {
      const T *wr = wv.data() + o * in_f;
      T acc = T(0);
      for (int64_t k = 0; k < in_f; ++k)
        acc += xr[k] * wr[k];
      yv[r * out_f + o] = acc + bv[o];
    }
  }
  store(out, yv);
  return out;
}

OpDef linear_op() {
  OpDef def;
  def.name = "linear";
  def.traits = OpTrait::composite;
  def.summary = "x @ weight^T + bias with weight [out, in] (PyTorch layout)";
  def.min_operands = 2;
  def.max_operands = 3;
  def.infer = [](const InferContext &c) {
    const std::string op = "linear";
    const TensorType &x = c.operands[0], &w = c.operands[1];
    require_same_dtype(op, c.operands);
    require_same_device(op, c.operands);
    require_numeric(op, x);
    require_min_rank(op, x, 1, "input");
    require_rank(op, w, 2, "weight");
    if (x.shape.back() != w.shape[1])
      fail_shape(op, "input features " + x.shape.back().to_string() + " of " + x.to_string() +
                         " must equal the weight's in-features (dim 1) " + w.shape[1].to_string() + " of " +
                         w.to_string());
    if (c.operands.size() > 2) {
      const TensorType &b = c.operands[2];
      if (b.rank() != 1 || b.shape[0] != w.shape[0])
        fail_shape(op, "bias must be 1-D of the weight's out-features [" + w.shape[0].to_string() + "], got " +
                           b.to_string());
    }
    Shape shape(x.shape.begin(), x.shape.end() - 1);
    shape.push_back(w.shape[0]);
    return std::vector<TensorType>{TensorType(x.dtype, shape, x.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    return std::vector<HostTensor>{is_float(c.operands[0].dtype()) ? linear_kernel<double>(c)
                                                                   : linear_kernel<uint64_t>(c)};
  };
  return def;
}

} // namespace

void register_linalg_ops(OpRegistry &r) {
  r.add(matmul_op());
  r.add(linear_op());
}

namespace ops {

Tensor matmul(const Tensor &a, const Tensor &b, bool transpose_a, bool transpose_b) {
  return record_op("matmul", {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
}
Tensor linear(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias) {
  std::vector<Tensor> operands{x, weight};
  if (bias)
    operands.push_back(*bias);
  return record_op("linear", operands);
}

} // namespace ops
} // namespace maxc
