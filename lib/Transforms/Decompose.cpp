#include "maxc/Transforms/Decompose.h"

#include "DecomposeRecurrence.h"
#include "maxc/Transforms/PromotePrecision.h"

#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Ops/TopK.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Transforms/DilatedConvAsBatch.h"
#include "maxc/Transforms/FoldBatchNorm.h"
#include "maxc/Transforms/FuseAttention.h"
#include "maxc/Transforms/MatmulLayout.h"
#include "maxc/Transforms/Rewrite.h"
#include "maxc/Realization/GraphRealizationContext.h"

namespace maxc {

namespace {

bool low_precision(DType d) { return d == DType::f16 || d == DType::bf16; }

// Runs `f` in f32 when `x` is f16/bf16 and casts the result back.
template <typename F> Tensor in_f32(const std::vector<Tensor> &xs, F f) {
  DType d = xs[0].dtype();
  if (!low_precision(d))
    return f(xs);
  std::vector<Tensor> wide;
  for (const Tensor &x : xs)
    wide.push_back(ops::cast(x, DType::f32));
  return ops::cast(f(wide), d);
}

std::vector<int64_t> trailing_axes(int64_t rank, int64_t count) {
  std::vector<int64_t> axes;
  for (int64_t i = rank - count; i < rank; ++i)
    axes.push_back(i);
  return axes;
}

Tensor softmax_primitives(const Tensor &x, int64_t axis, bool log) {
  Tensor shifted = x - ops::max(x, {axis}, true);
  Tensor sum = ops::sum(ops::exp(shifted), {axis}, true);
  return log ? shifted - ops::log(sum) : ops::exp(shifted) / sum;
}

std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, MatmulLayout &layout) {
  const Attrs &a = node.attrs;
  const std::string &op = node.op;
  if (op == "softmax" || op == "log_softmax") {
    int64_t axis = a.get_int("axis");
    return {in_f32(in, [&](const std::vector<Tensor> &x) { return softmax_primitives(x[0], axis, op == "log_softmax"); })};
  }
  if (op == "recurrence") // unrolled (a static length)
    return unroll_recurrence(node, in);
  if (op == "attention") { // the pattern FuseAttention.h recognizes, row-major matmuls
    std::vector<Tensor> kv = {in[1], in[2]};
    if (int64_t g = a.get_int("kv_groups"); g > 1) // repeated over each group of query heads
      for (Tensor &t : kv) {
        Shape s = t.shape(), grouped = s;
        size_t h = s.size() - 3;
        grouped.insert(grouped.begin() + static_cast<std::ptrdiff_t>(h) + 1, Dim(g));
        s[h] = s[h] * Dim(g);
        t = ops::reshape(ops::broadcast_to(ops::unsqueeze(t, {static_cast<int64_t>(h) + 1}), grouped), s);
      }
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < kv[0].rank(); ++i)
      perm.push_back(i < kv[0].rank() - 2 ? i : i == kv[0].rank() - 2 ? i + 1 : i - 1);
    Tensor s = ops::matmul(in[0], ops::transpose(kv[0], perm)) * ops::full(a.get_real("scale"), in[0].dtype());
    if (in.size() > 3)
      s = in[3].dtype() == DType::boolean ? ops::where(in[3], s, ops::full(a.get_real("fill"), s.dtype())) : s + in[3];
    Tensor p = in_f32({s}, [&](const std::vector<Tensor> &x) { return softmax_primitives(x[0], -1, false); });
    return {ops::matmul(p, kv[1])};
  }
  if (op == "layer_norm") {
    return {in_f32(in, [&](const std::vector<Tensor> &x) {
      auto axes = trailing_axes(x[0].rank(), x[1].rank());
      Tensor centered = x[0] - ops::mean(x[0], axes, true);
      Tensor var = ops::mean(centered * centered, axes, true);
      Tensor y = centered * ops::rsqrt(var + a.get_real("eps")) * x[1];
      return x.size() > 2 ? y + x[2] : y;
    })};
  }
  if (op == "rms_norm") {
    return {in_f32(in, [&](const std::vector<Tensor> &x) {
      auto axes = trailing_axes(x[0].rank(), x[1].rank());
      return x[0] * ops::rsqrt(ops::mean(x[0] * x[0], axes, true) + a.get_real("eps")) * x[1];
    })};
  }
  if (op == "batch_norm") {
    return {in_f32(in, [&](const std::vector<Tensor> &x) {
      // Parameters [C] → [C, 1, ..., 1] to broadcast over NCHW.
      std::vector<int64_t> spatial;
      for (int64_t i = 1; i < x[0].rank() - 1; ++i)
        spatial.push_back(i);
      auto per_channel = [&](const Tensor &p) { return spatial.empty() ? p : ops::unsqueeze(p, spatial); };
      Tensor inv = ops::rsqrt(per_channel(x[4]) + a.get_real("eps")) * per_channel(x[1]);
      return (x[0] - per_channel(x[3])) * inv + per_channel(x[2]);
    })};
  }
  if (op == "linear") {
    Tensor x = in[0];
    bool vector = x.rank() == 1;
    if (vector)
      x = ops::unsqueeze(x, {0});
    // x @ w^T as a row-major matmul: constant weights (and subgraph
    // parameters bound to constants) are transposed once, at compile time
    // (see MatmulLayout.h).
    Tensor y = ops::matmul(x, layout.transposed(node.operands[1], in[1]));
    if (in.size() > 2)
      y = y + in[2];
    return {vector ? ops::squeeze(y, {0}) : y};
  }
  if (op == "embedding")
    return {ops::gather(in[0], in[1], 0)};
  if (op == "matmul_nbits")
    return {ops::matmul_nbits_primitives(in, a)};
  if (op == kTopKOp)
    return ops::top_k_primitives(in, a);
  if (op == "global_avg_pool2d")
    return {ops::mean(in[0], {2, 3}, true)};
  return {};
}

// Rebuilds `from` into the empty graph `to`. `pretransposed`: the inputs of
// `from` (a subgraph) that arrive transposed; `calls`: the same for the
// subgraphs that `from`'s call nodes invoke. `own_folds`: `from`'s batch
// norms folded per call site; `call_folds`: those of every subgraph.
void rebuild(const Graph &from, Graph &to, const std::vector<PretransposedInput> &pretransposed,
             const CallSiteLayout &calls, const std::vector<CallSiteBatchNorm> &own_folds,
             const CallSiteBatchNorms &call_folds, const DecomposeOptions &options) {
  carry_symbols(from, to);
  std::vector<bool> replaced(from.input_ids().size(), false);
  for (const PretransposedInput &p : pretransposed)
    replaced[p.index] = p.replaces;
  for (size_t i = 0; i < from.input_ids().size(); ++i) {
    const ValueInfo &info = from.value_info(from.input_ids()[i]);
    if (replaced[i])
      to.add_input(transposed_type(info.type), info.name + ".T");
    else
      to.add_input(info.type, info.name);
  }
  for (const PretransposedInput &p : pretransposed)
    if (!p.replaces) {
      const ValueInfo &info = from.value_info(from.input_ids()[p.index]);
      to.add_input(transposed_type(info.type), info.name + ".T");
    }
  for (const auto &[name, data] : from.constants())
    to.add_constant(name, data);

  GraphRealizationContext ctx(to);
  MatmulLayout layout(from, ctx);
  GraphRebuild rebuild(from, to);
  std::vector<Tensor> &values = rebuild.values();
  for (size_t i = 0; i < from.input_ids().size(); ++i)
    if (!replaced[i]) // a replaced input has no row-major value: only its transposed uses read it
      values[from.input_ids()[i]] = Tensor::from_graph_value(to.inputs()[i]);
  size_t appended = from.input_ids().size();
  for (const PretransposedInput &p : pretransposed)
    layout.set_pretransposed(from.input_ids()[p.index],
                             Tensor::from_graph_value(to.inputs()[p.replaces ? p.index : appended++]));

  Readers readers(from); // for batch-norm folding and attention matching
  const std::vector<std::vector<int64_t>> &consumers = readers.table();
  std::vector<bool> folded(from.nodes().size(), false);
  // Attention patterns become one attention node; their inner nodes go.
  std::map<size_t, AttentionMatch> attention;
  if (options.fuse_attention)
    attention = match_attention(from, readers, options.attention_low_precision, options.attention_kv_groups);
  for (const auto &[n, m] : attention)
    for (size_t inner : m.inner)
      folded[inner] = true;
  std::map<size_t, const CallSiteBatchNorm *> fold_at; // conv node -> its per-call-site fold
  for (const CallSiteBatchNorm &f : own_folds) {
    fold_at[f.conv] = &f;
    if (f.scale >= 0) // the conv reads the depthwise scale's input: it goes
      folded[static_cast<size_t>(f.scale)] = true;
  }

  for (size_t n = 0; n < from.nodes().size(); ++n) {
    const Node &node = from.nodes()[n];
    if (folded[n])
      continue; // a batch_norm folded into its conv2d, whose result it got (or a depthwise scale folded in too)
    NodeNameScope named(ctx, node.name); // the nodes made for this one keep its name
    std::vector<Tensor> operands = rebuild.operands(node);
    if (auto it = attention.find(n); it != attention.end()) {
      const AttentionMatch &m = it->second;
      Tensor k = m.k_perm.empty() ? values[m.k] : ops::transpose(values[m.k], m.k_perm);
      std::vector<Tensor> qkv = {values[m.q], k, values[m.v]};
      if (m.mask)
        qkv.push_back(m.mask_inverted ? ops::logical_not(values[*m.mask]) : values[*m.mask]);
      Attrs attrs{{"scale", m.scale}, {"fill", m.fill}};
      if (m.kv_groups > 1)
        attrs.set("kv_groups", m.kv_groups);
      values[node.results[0]] = ctx.record("attention", qkv, attrs)[0];
      continue;
    }
    if (auto it = fold_at.find(n); it != fold_at.end()) { // W' and b' arrive as parameters
      const CallSiteBatchNorm &f = *it->second;
      folded[f.batch_norm] = true;
      Tensor x = f.scale >= 0 ? values[from.nodes()[static_cast<size_t>(f.scale)].operands[0]] : operands[0];
      values[from.nodes()[f.batch_norm].results[0]] =
          ctx.record("conv2d", {x, values[from.input_ids()[f.weight]], values[from.input_ids()[f.bias]]},
                     node.attrs)[0];
      continue;
    }
    if (const std::string *callee = call_body_name(node))
      if (auto it = call_folds.find(*callee); it != call_folds.end())
        operands = fold_call_site_batch_norms(from, node, *from.find_subgraph(it->first), it->second, operands, ctx);
    if (int64_t bn = foldable_batch_norm(from, n, consumers); bn >= 0) {
      folded[bn] = true;
      values[from.nodes()[bn].results[0]] = fold_batch_norm(from, node, from.nodes()[bn], operands[0], ctx);
      continue;
    }
    bool whole = (options.keep_rowwise && keeps_row_kernel(from, node)) ||
                 (options.keep_recurrence && node.op == "recurrence" && keeps_recurrence(from, node)) ||
                 (options.keep_matmul_nbits && node.op == "matmul_nbits" && keeps_matmul_nbits(from, node)) ||
                 (options.keep_top_k && node.op == kTopKOp && keeps_top_k(from, node)) ||
                 (options.fuse_attention && node.op == "attention" && keeps_attention(from, node, options.attention_low_precision) &&
                  (options.attention_kv_groups || node.attrs.get_int("kv_groups") == 1));
    std::vector<Tensor> results = whole                      ? std::vector<Tensor>{}
                                  : is_composite_op(node.op) ? rewrite(node, operands, layout)
                                  : is_call(node)          ? layout.rewrite_call(node, operands, calls)
                                                           : layout.rewrite_matmul(node, operands);
    rebuild.define(node, results.empty() ? ctx.record(node.op, operands, node.attrs) : results);
  }
  rebuild.set_outputs();
}

} // namespace

bool is_composite_op(const std::string &op) {
  return op == "softmax" || op == "log_softmax" || op == "layer_norm" || op == "rms_norm" || op == "batch_norm" ||
         op == "linear" || op == "embedding" || op == "global_avg_pool2d" || op == "attention" || op == "recurrence" || op == "matmul_nbits" || op == kTopKOp;
}

bool keeps_top_k(const Graph &graph, const Node &node) {
  return graph.type_of(node.operands[0]).dtype == DType::f32;
}

bool keeps_matmul_nbits(const Graph &graph, const Node &node) {
  return graph.type_of(node.operands[0]).dtype == DType::f32;
}

bool keeps_attention(const Graph &graph, const Node &node, bool f16_too) {
  const Shape &q = graph.type_of(node.operands[0]).shape, &v = graph.type_of(node.operands[2]).shape;
  DType d = graph.type_of(node.operands[0]).dtype;
  return (d == DType::f32 || (f16_too && low_precision(d))) && q.back().is_static() && v.back().is_static();
}

bool keeps_recurrence(const Graph &graph, const Node &node) {
  return graph.type_of(node.operands[0]).dtype == DType::f32;
}

bool keeps_row_kernel(const Graph &graph, const Node &node) {
  if (!op_traits(node.op).has(OpTrait::rowwise))
    return false;
  const TensorType &x = graph.type_of(node.operands[0]);
  if (x.dtype != DType::f32 || x.rank() == 0)
    return false;
  if (node.attrs.has("axis")) { // softmax, log_softmax: rows along the last axis
    int64_t axis = node.attrs.get_int("axis");
    return axis == -1 || axis == x.rank() - 1;
  }
  return true; // the norms: rows over the trailing weight.rank() dims
}

std::unique_ptr<Graph> decompose(const Graph &source, const DecomposeOptions &options) {
  std::unique_ptr<Graph> promoted = options.promote_low_precision ? promote_low_precision(source) : nullptr;
  const Graph &graph = promoted ? *promoted : source;
  CallSiteLayout calls = plan_call_site_layout(graph);
  CallSiteBatchNorms folds = plan_call_site_batch_norms(graph);
  auto out = std::make_unique<Graph>(graph.name());
  for (const Graph *sub : subgraphs_bodies_first(graph)) { // a node's bodies before it
    const std::string &name = sub->name();
    auto body = std::make_shared<Graph>(name);
    out->add_subgraph(body);
    auto it = calls.inputs.find(name);
    auto f = folds.find(name);
    rebuild(*sub, *body, it != calls.inputs.end() ? it->second : std::vector<PretransposedInput>{}, calls,
            f != folds.end() ? f->second : std::vector<CallSiteBatchNorm>{}, {}, options);
  }
  rebuild(graph, *out, {}, calls, {}, folds, options);
  // Lowerings that must see the folded convs (a batch norm folds only into
  // the conv that it reads directly).
  if (options.dilated_conv_as_batch)
    if (std::unique_ptr<Graph> lowered = apply_patterns(*out, {&dilated_conv_as_batch_pattern()}))
      out = std::move(lowered);
  return out;
}

} // namespace maxc
