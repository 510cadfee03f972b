#include "maxc/Transforms/FoldBatchNorm.h"

#include <cmath>

namespace maxc {

namespace {

const HostTensor *constant_of(const Graph &g, ValueId id) {
  const ValueInfo &info = g.value_info(id);
  if (info.producer < 0 || g.nodes()[info.producer].op != "constant")
    return nullptr;
  return &g.constant(g.nodes()[info.producer].attrs.get_string("name"));
}

std::string constant_name(const Graph &g, ValueId id) {
  return g.nodes()[g.value_info(id).producer].attrs.get_string("name");
}

} // namespace

int64_t foldable_batch_norm(const Graph &from, size_t conv, const std::vector<std::vector<int64_t>> &consumers) {
  const Node &c = from.nodes()[conv];
  if (c.op != "conv2d")
    return -1;
  const std::vector<int64_t> &readers = consumers[c.results[0]];
  if (readers.size() != 1 || readers[0] < 0)
    return -1;
  const Node &bn = from.nodes()[readers[0]];
  if (bn.op != "batch_norm" || bn.operands[0] != c.results[0])
    return -1;
  DType d = from.type_of(c.results[0]).dtype;
  if (d != DType::f32 && d != DType::f64)
    return -1;
  for (size_t i = 1; i < c.operands.size(); ++i)
    if (!constant_of(from, c.operands[i]))
      return -1;
  for (size_t i = 1; i < bn.operands.size(); ++i)
    if (!constant_of(from, bn.operands[i]))
      return -1;
  return readers[0];
}

Tensor fold_batch_norm(const Graph &from, const Node &conv, const Node &batch_norm, const Tensor &x,
                       GraphRealizationContext &ctx) {
  const HostTensor &w = *constant_of(from, conv.operands[1]);
  const HostTensor *bias = conv.operands.size() > 2 ? constant_of(from, conv.operands[2]) : nullptr;
  const HostTensor &gamma = *constant_of(from, batch_norm.operands[1]), &beta = *constant_of(from, batch_norm.operands[2]);
  const HostTensor &mean = *constant_of(from, batch_norm.operands[3]), &var = *constant_of(from, batch_norm.operands[4]);
  double eps = batch_norm.attrs.get_real("eps");
  int64_t out = w.shape()[0], per_out = out > 0 ? w.numel() / out : 0;
  HostTensor wf(w.dtype(), w.shape()), bf(w.dtype(), {out});
  for (int64_t o = 0; o < out; ++o) {
    double s = gamma.get_f64(o) / std::sqrt(var.get_f64(o) + eps);
    for (int64_t i = 0; i < per_out; ++i)
      wf.set_f64(o * per_out + i, w.get_f64(o * per_out + i) * s);
    bf.set_f64(o, ((bias ? bias->get_f64(o) : 0.0) - mean.get_f64(o)) * s + beta.get_f64(o));
  }
  std::string wname = constant_name(from, conv.operands[1]), bname = constant_name(from, batch_norm.operands[2]);
  Tensor wt = ctx.add_source(Tensor::from_host(wf), wname + ".bn_folded");
  Tensor bt = ctx.add_source(Tensor::from_host(bf), bname + ".bn_folded");
  return ctx.record("conv2d", {x, wt, bt}, conv.attrs)[0];
}

} // namespace maxc
