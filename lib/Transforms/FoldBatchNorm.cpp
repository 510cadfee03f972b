#include "maxc/Transforms/FoldBatchNorm.h"

#include "maxc/Transforms/CallSites.h"
#include "maxc/Transforms/Rewrite.h"

#include <algorithm>
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

bool is_channel_scale(const Graph &g, const Node &node) {
  if (node.op != "conv2d" || node.attrs.get_int("exact", 0) != 0)
    return false;
  const TensorType &x = g.type_of(node.operands[0]), &w = g.type_of(node.operands[1]);
  std::vector<int64_t> pad = node.attrs.get_ints("padding", {});
  if ((x.dtype != DType::f32 && x.dtype != DType::f64) || w.dtype != x.dtype || x.rank() != 4 ||
      !x.shape[1].is_static() || x.shape[1].value() == 0)
    return false;
  return node.attrs.get_int("groups") == x.shape[1].value() && w.shape == Shape{x.shape[1], Dim(1), Dim(1), Dim(1)} &&
         node.attrs.get_ints("stride") == std::vector<int64_t>{1, 1} &&
         std::all_of(pad.begin(), pad.end(), [](int64_t p) { return p == 0; });
}

HostTensor scaled_by_channel(const HostTensor &w, const HostTensor &d) {
  HostTensor out(w.dtype(), w.shape());
  int64_t C = d.numel(), per_c = w.numel() / std::max<int64_t>(1, w.shape()[0] * C);
  for (int64_t i = 0; i < w.numel(); ++i)
    out.set_f64(i, w.get_f64(i) * d.get_f64((i / per_c) % C));
  return out;
}

int64_t foldable_batch_norm(const Graph &from, size_t conv, const std::vector<std::vector<int64_t>> &consumers) {
  const Node &c = from.nodes()[conv];
  if (c.op != "conv2d" || c.attrs.get_int("exact", 0) != 0) // folding would round an exact conv's weights
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

namespace {

/// W' and b' from the conv's weight (and bias, may be null) and the norm's
/// parameters, computed in double, stored in the weight's dtype.
std::pair<HostTensor, HostTensor> folded_parameters(const HostTensor &w, const HostTensor *bias, const HostTensor &gamma,
                                                    const HostTensor &beta, const HostTensor &mean,
                                                    const HostTensor &var, double eps) {
  int64_t out = w.shape()[0], per_out = out > 0 ? w.numel() / out : 0;
  HostTensor wf(w.dtype(), w.shape()), bf(w.dtype(), {out});
  for (int64_t o = 0; o < out; ++o) {
    double s = gamma.get_f64(o) / std::sqrt(var.get_f64(o) + eps);
    for (int64_t i = 0; i < per_out; ++i)
      wf.set_f64(o * per_out + i, w.get_f64(o * per_out + i) * s);
    bf.set_f64(o, ((bias ? bias->get_f64(o) : 0.0) - mean.get_f64(o)) * s + beta.get_f64(o));
  }
  return {std::move(wf), std::move(bf)};
}

} // namespace

Tensor fold_batch_norm(const Graph &from, const Node &conv, const Node &batch_norm, const Tensor &x,
                       GraphRealizationContext &ctx) {
  const HostTensor *bias = conv.operands.size() > 2 ? constant_of(from, conv.operands[2]) : nullptr;
  auto [wf, bf] = folded_parameters(*constant_of(from, conv.operands[1]), bias, *constant_of(from, batch_norm.operands[1]),
                                    *constant_of(from, batch_norm.operands[2]), *constant_of(from, batch_norm.operands[3]),
                                    *constant_of(from, batch_norm.operands[4]), batch_norm.attrs.get_real("eps"));
  std::string wname = constant_name(from, conv.operands[1]), bname = constant_name(from, batch_norm.operands[2]);
  Tensor wt = ctx.add_source(Tensor::from_host(wf), wname + ".bn_folded");
  Tensor bt = ctx.add_source(Tensor::from_host(bf), bname + ".bn_folded");
  return ctx.record("conv2d", {x, wt, bt}, conv.attrs)[0];
}

CallSiteBatchNorms plan_call_site_batch_norms(const Graph &root) {
  CallSiteBatchNorms plan;
  std::map<std::string, std::vector<bool>> bound = constant_bound_inputs(root);
  for (const auto &[name, sub] : root.subgraphs()) {
    auto it = bound.find(name);
    if (it == bound.end())
      continue;
    const Graph &g = *sub;
    Readers readers(g); // a graph output counts as a use, -1
    const std::vector<std::vector<int64_t>> &consumers = readers.table();
    auto input_index = [&](ValueId id) -> int64_t {
      const ValueInfo &info = g.value_info(id);
      return info.producer < 0 ? static_cast<int64_t>(info.index) : -1;
    };
    // A constant value at every call: a constant of the body, or an input
    // every call binds to a constant.
    auto constant_everywhere = [&](ValueId id) {
      int64_t i = input_index(id);
      return i >= 0 ? static_cast<bool>(it->second[static_cast<size_t>(i)]) : constant_of(g, id) != nullptr;
    };
    // An input bound to constants that only `node` reads, once: replaceable
    // by a per-call value.
    auto own_parameter = [&](ValueId id, size_t node) {
      int64_t i = input_index(id);
      return i >= 0 && it->second[static_cast<size_t>(i)] && consumers[id] == std::vector<int64_t>{static_cast<int64_t>(node)};
    };
    for (size_t c = 0; c < g.nodes().size(); ++c) {
      const Node &conv = g.nodes()[c];
      if (conv.op != "conv2d" || conv.attrs.get_int("exact", 0) != 0)
        continue;
      const std::vector<int64_t> &readers = consumers[conv.results[0]];
      if (readers.size() != 1 || readers[0] < 0)
        continue;
      size_t n = static_cast<size_t>(readers[0]);
      const Node &bn = g.nodes()[n];
      DType d = g.type_of(conv.results[0]).dtype;
      if (bn.op != "batch_norm" || bn.operands[0] != conv.results[0] || (d != DType::f32 && d != DType::f64))
        continue;
      bool has_bias = conv.operands.size() > 2;
      ValueId bias = has_bias ? conv.operands[2] : bn.operands[2];
      bool ok = own_parameter(conv.operands[1], c) && own_parameter(bias, has_bias ? c : n);
      for (size_t i = 1; i < bn.operands.size(); ++i)
        ok = ok && constant_everywhere(bn.operands[i]);
      if (!ok)
        continue;
      CallSiteBatchNorm fold{c, n, static_cast<size_t>(input_index(conv.operands[1])),
                             static_cast<size_t>(input_index(bias))};
      // A depthwise 1x1 scale before the conv, its weight a parameter too.
      const ValueInfo &xi = g.value_info(conv.operands[0]);
      if (xi.producer >= 0 && conv.attrs.get_int("groups") == 1) {
        size_t s = static_cast<size_t>(xi.producer);
        const Node &dw = g.nodes()[s];
        if (is_channel_scale(g, dw) && dw.operands.size() == 2 && g.type_of(dw.results[0]).dtype == d &&
            consumers[conv.operands[0]] == std::vector<int64_t>{static_cast<int64_t>(c)} &&
            own_parameter(dw.operands[1], s)) {
          fold.scale = static_cast<int64_t>(s);
          fold.scale_weight = static_cast<size_t>(input_index(dw.operands[1]));
        }
      }
      plan[name].push_back(fold);
    }
  }
  return plan;
}

std::vector<Tensor> fold_call_site_batch_norms(const Graph &root, const Node &call, const Graph &callee,
                                               const std::vector<CallSiteBatchNorm> &folds,
                                               std::vector<Tensor> operands, GraphRealizationContext &ctx) {
  // A parameter's value at this call: the bound root constant, or the body's.
  auto value = [&](ValueId id) -> const HostTensor & {
    const ValueInfo &info = callee.value_info(id);
    if (info.producer < 0)
      return *constant_of(root, call.operands[info.index]);
    return *constant_of(callee, id);
  };
  for (const CallSiteBatchNorm &f : folds) {
    const Node &conv = callee.nodes()[f.conv], &bn = callee.nodes()[f.batch_norm];
    const HostTensor *bias = conv.operands.size() > 2 ? &value(conv.operands[2]) : nullptr;
    HostTensor scaled; // when a depthwise scale folds in
    if (f.scale >= 0)
      scaled = scaled_by_channel(value(conv.operands[1]),
                                 value(callee.nodes()[static_cast<size_t>(f.scale)].operands[1]));
    auto [wf, bf] = folded_parameters(f.scale >= 0 ? scaled : value(conv.operands[1]), bias, value(bn.operands[1]), value(bn.operands[2]),
                                      value(bn.operands[3]), value(bn.operands[4]), bn.attrs.get_real("eps"));
    operands[f.weight] = ctx.add_source(Tensor::from_host(wf), constant_name(root, call.operands[f.weight]) + ".bn_folded");
    operands[f.bias] = ctx.add_source(Tensor::from_host(bf), constant_name(root, call.operands[f.bias]) + ".bn_folded");
  }
  return operands;
}

} // namespace maxc
