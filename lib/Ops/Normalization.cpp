// Normalization: layer_norm, rms_norm, and inference-mode batch_norm.
//
// Reference semantics: statistics accumulate in double with the biased
// (population) variance, computed in two passes (mean first) for accuracy;
// the result is rounded once to the input dtype.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <cmath>

namespace maxc {
using namespace ophelpers;

namespace {

void check_eps(const std::string &op, double eps) {
  if (!std::isfinite(eps) || eps < 0)
    fail_attr(op, "eps must be finite and >= 0, got " + std::to_string(eps));
}

// Shared checks of layer_norm / rms_norm: every operand has x's dtype (a
// float), weight (and bias) cover x's trailing dims exactly.
void check_trailing_norm(const std::string &op, const std::vector<TensorType> &operands, double eps) {
  const TensorType &x = operands[0], &w = operands[1];
  require_float(op, x, "input");
  require_same_dtype(op, operands);
  require_same_device(op, operands);
  require_min_rank(op, w, 1, "weight");
  if (w.rank() > x.rank())
    fail_shape(op, "weight " + w.to_string() + " has more dims than the input " + x.to_string());
  Shape trailing(x.shape.end() - w.rank(), x.shape.end());
  if (trailing != w.shape)
    fail_shape(op, "weight shape " + shape_to_string(w.shape) + " must equal the trailing dims " +
                       shape_to_string(trailing) + " of the input " + x.to_string());
  if (operands.size() > 2 && operands[2].shape != w.shape)
    fail_shape(op, "bias " + operands[2].to_string() + " must have the weight's shape " + shape_to_string(w.shape));
  check_eps(op, eps);
}

OpDef layer_norm_op() {
  OpDef def;
  def.name = "layer_norm";
  def.traits = OpTrait::composite | OpTrait::rowwise;
  def.summary = "(x - mean) / sqrt(var + eps) * weight + bias over the last weight.rank() dims";
  def.min_operands = 2;
  def.max_operands = 3;
  def.attrs = {{"eps", AttrKind::real, AttrValue(1e-5), "added to the variance"}};
  def.infer = [](const InferContext &c) {
    check_trailing_norm("layer_norm", c.operands, c.attrs.get_real("eps"));
    return std::vector<TensorType>{c.operands[0]};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0], &w = c.operands[1];
    const HostTensor *b = c.operands.size() > 2 ? &c.operands[2] : nullptr;
    HostTensor out = c.make_result();
    double eps = c.attrs.get_real("eps");
    int64_t inner = w.numel();
    int64_t rows = inner ? x.numel() / inner : 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t base = r * inner;
      double mean = 0, var = 0;
      for (int64_t j = 0; j < inner; ++j)
        mean += x.get_f64(base + j);
      mean /= static_cast<double>(inner);
      for (int64_t j = 0; j < inner; ++j) {
        double d = x.get_f64(base + j) - mean;
        var += d * d;
      }
      var /= static_cast<double>(inner);
      double rstd = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < inner; ++j) {
        double y = (x.get_f64(base + j) - mean) * rstd * w.get_f64(j);
        out.set_f64(base + j, b ? y + b->get_f64(j) : y);
      }
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef rms_norm_op() {
  OpDef def;
  def.name = "rms_norm";
  def.traits = OpTrait::composite | OpTrait::rowwise;
  def.summary = "x / sqrt(mean(x^2) + eps) * weight over the last weight.rank() dims";
  def.min_operands = def.max_operands = 2;
  def.attrs = {{"eps", AttrKind::real, AttrValue(1e-6), "added to the mean square"}};
  def.infer = [](const InferContext &c) {
    check_trailing_norm("rms_norm", c.operands, c.attrs.get_real("eps"));
    return std::vector<TensorType>{c.operands[0]};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0], &w = c.operands[1];
    HostTensor out = c.make_result();
    double eps = c.attrs.get_real("eps");
    int64_t inner = w.numel();
    int64_t rows = inner ? x.numel() / inner : 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t base = r * inner;
      double ms = 0;
      for (int64_t j = 0; j < inner; ++j) {
        double v = x.get_f64(base + j);
        ms += v * v;
      }
      double scale = 1.0 / std::sqrt(ms / static_cast<double>(inner) + eps);
      for (int64_t j = 0; j < inner; ++j)
        out.set_f64(base + j, x.get_f64(base + j) * scale * w.get_f64(j));
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef batch_norm_op() {
  OpDef def;
  def.name = "batch_norm";
  def.traits = OpTrait::composite;
  def.summary = "inference batch norm over channel dim 1: (x - mean) / sqrt(var + eps) * scale + bias";
  def.min_operands = def.max_operands = 5;
  def.attrs = {{"eps", AttrKind::real, AttrValue(1e-5), "added to the variance"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "batch_norm";
    const TensorType &x = c.operands[0];
    require_float(op, x, "input");
    require_same_dtype(op, c.operands);
    require_same_device(op, c.operands);
    require_min_rank(op, x, 2, "input");
    const char *names[] = {"input", "scale", "bias", "mean", "var"};
    for (size_t i = 1; i < 5; ++i) {
      const TensorType &p = c.operands[i];
      if (p.rank() != 1 || p.shape[0] != x.shape[1])
        fail_shape(op, std::string(names[i]) + " must be 1-D of the channel count [" + x.shape[1].to_string() +
                           "] of the input " + x.to_string() + ", got " + p.to_string());
    }
    check_eps(op, c.attrs.get_real("eps"));
    return std::vector<TensorType>{x};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0], &scale = c.operands[1], &bias = c.operands[2], &mean = c.operands[3],
                     &var = c.operands[4];
    HostTensor out = c.make_result();
    double eps = c.attrs.get_real("eps");
    int64_t channels = x.shape()[1];
    int64_t inner = 1; // elements per (n, c) plane
    for (size_t d = 2; d < x.shape().size(); ++d)
      inner *= x.shape()[d];
    int64_t planes = x.shape()[0] * channels;
    for (int64_t p = 0; p < planes; ++p) {
      int64_t ch = p % channels;
      double m = mean.get_f64(ch), k = scale.get_f64(ch) / std::sqrt(var.get_f64(ch) + eps), b = bias.get_f64(ch);
      for (int64_t j = 0; j < inner; ++j)
        out.set_f64(p * inner + j, (x.get_f64(p * inner + j) - m) * k + b);
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_normalization_ops(OpRegistry &r) {
  r.add(layer_norm_op());
  r.add(rms_norm_op());
  r.add(batch_norm_op());
}

namespace ops {

Tensor layer_norm(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias, double eps) {
  std::vector<Tensor> operands{x, weight};
  if (bias)
    operands.push_back(*bias);
  return record_op("layer_norm", operands, {{"eps", eps}});
}
Tensor rms_norm(const Tensor &x, const Tensor &weight, double eps) {
  return record_op("rms_norm", {x, weight}, {{"eps", eps}});
}
Tensor batch_norm(const Tensor &x, const Tensor &scale, const Tensor &bias, const Tensor &mean, const Tensor &var,
                  double eps) {
  return record_op("batch_norm", {x, scale, bias, mean, var}, {{"eps", eps}});
}

} // namespace ops
} // namespace maxc
