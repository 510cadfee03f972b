#include "maxc/Transforms/QuantizeWeights.h"

#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Support/Error.h"
#include "maxc/Transforms/Rewrite.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace maxc {

namespace {

/// `w` (f32, rank 2: [N, K] when `nk`, else [K, N]) quantized block by block
/// along K; `layers` (optional) gets the weight's relative error.
NbitsWeight quantize_matrix(const HostTensor &w, bool nk, const QuantizeWeightsOptions &options,
                            std::vector<QuantizedLayer> *layers, const std::string &weight, const std::string &node) {
  int64_t k = nk ? w.shape()[1] : w.shape()[0], n = nk ? w.shape()[0] : w.shape()[1];
  std::vector<float> wnk(static_cast<size_t>(k * n));
  const float *src = w.data_as<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      wnk[i * k + j] = nk ? src[i * k + j] : src[j * n + i];
  NbitsLayout l{k, n, options.bits, options.block};
  NbitsWeight q = quantize_nbits(wnk.data(), l, options.symmetric, options.search);
  if (layers) {
    std::vector<float> back = dequantize_nbits(l, q.b.data_as<uint8_t>(), q.scales.data_as<float>(),
                                               q.zero_points.valid() ? q.zero_points.data_as<uint8_t>() : nullptr);
    double err = 0, norm = 0;
    for (size_t i = 0; i < back.size(); ++i) {
      double d = static_cast<double>(back[i]) - wnk[i];
      err += d * d;
      norm += static_cast<double>(wnk[i]) * wnk[i];
    }
    layers->push_back({weight, node, k, n, norm > 0 ? std::sqrt(err / norm) : std::sqrt(err)});
  }
  return q;
}

/// A quantized weight's operands of matmul_nbits: codes, scales and (when
/// asymmetric) zero points.
struct QuantizedOperands {
  Tensor codes, scales;
  std::optional<Tensor> zero_points;
};

/// `q` as constants of the graph being built, named after the f32 weight.
QuantizedOperands quantized_constants(const NbitsWeight &q, const std::string &weight, int64_t bits) {
  std::string tag = ".q" + std::to_string(bits);
  QuantizedOperands o{Tensor::from_host(q.b, weight + tag), Tensor::from_host(q.scales, weight + tag + ".scales"), {}};
  if (q.zero_points.valid())
    o.zero_points = Tensor::from_host(q.zero_points, weight + tag + ".zero_points");
  return o;
}

/// matmul_nbits in place of `node` (a matmul or a linear, `operands` its
/// rebuilt operands: a linear's bias is added after).
Tensor quantized_product(const Node &node, const Tensor &a, const QuantizedOperands &q, int64_t k, int64_t n,
                         const QuantizeWeightsOptions &options, const std::vector<Tensor> &operands) {
  Tensor y = ops::matmul_nbits(a, q.codes, q.scales, q.zero_points, k, n, options.bits, options.block);
  if (node.op == "linear" && operands.size() > 2)
    y = y + operands[2];
  return y;
}

/// `from`'s constants (those named in `only`, or all) into `to`, lazily
/// transposed ones as such.
void copy_constants(const Graph &from, Graph &to, const std::set<std::string> *only) {
  for (const auto &[name, data] : from.constant_types()) {
    if (only && !only->count(name))
      continue;
    if (const HostTensor *source = from.transposed_source(name))
      to.add_transposed_constant(name, *source);
    else
      to.add_constant(name, data);
  }
}

/// How a matmul or linear reads its operand 1 as a weight it can quantize:
/// K, N, and whether the weight is [N, K] (linear's weight and a
/// transposed B as they are).
struct WeightUse {
  int64_t k = 0, n = 0;
  bool nk = false;
};

/// The use of a weight of dtype `wd` and shape `ws` as operand 1 of `node`
/// (A of type `a`), or none when it is not one the quantizer takes: a
/// transposed A or a third operand of a matmul, a weight not f32 [K, N], K
/// under a block, too few weights.
std::optional<WeightUse> quantizable_use(const Node &node, const TensorType &a, DType wd, const std::vector<int64_t> &ws,
                                         const QuantizeWeightsOptions &options) {
  bool linear = node.op == "linear";
  if (!linear && (node.op != "matmul" || node.attrs.get_bool("transpose_a") || node.operands.size() != 2))
    return std::nullopt;
  if (wd != DType::f32 || ws.size() != 2 || a.dtype != DType::f32 || a.rank() < (linear ? 1 : 2))
    return std::nullopt;
  WeightUse u;
  u.nk = linear || node.attrs.get_bool("transpose_b");
  u.k = u.nk ? ws[1] : ws[0];
  u.n = u.nk ? ws[0] : ws[1];
  if (u.k < options.block || u.k * u.n < kMinQuantizedElements)
    return std::nullopt;
  return u;
}

class QuantizeMatmul : public RewritePattern {
public:
  QuantizeMatmul(const char *op, const QuantizeWeightsOptions &options, std::vector<QuantizedLayer> *layers)
      : op_(op), options_(options), layers_(layers) {}
  const char *name() const override { return "quantize-weights"; }
  const char *root_op() const override { return op_; }

  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &operands, RewriteContext &rc) const override {
    const Node *p = rc.match.producer_op(node.operands[1], "constant");
    if (!p)
      return {};
    const std::string &cname = p->attrs.get_string("name");
    const HostTensor &w = rc.match.graph().constant(cname);
    std::optional<WeightUse> use = quantizable_use(node, operands[0].type(), w.dtype(), w.shape(), options_);
    if (!use)
      return {};
    NbitsWeight q = quantize_matrix(w, use->nk, options_, layers_, cname, node.name);
    QuantizedOperands qo = quantized_constants(q, cname, options_.bits);
    return {quantized_product(node, operands[0], qo, use->k, use->n, options_, operands)};
  }

private:
  const char *op_;
  QuantizeWeightsOptions options_;
  std::vector<QuantizedLayer> *layers_;
};

// --- Weights passed to subgraph calls ---
//
// Deduplicated repeated layers (ONNX dedup, the JSON format's `repeat`) are
// one body called once per layer, each call passing that layer's weights: in
// the body a weight is an input, not a constant. An input the body reads
// only as the weight of matmuls/linears (one orientation), passed by every
// call of the body as a constant f32 matrix of the caller, becomes three
// inputs — the codes, scales and zero points of matmul_nbits — and each call
// passes its own weight quantized.

/// Body name -> input index -> how the body reads that input.
using ParamPlans = std::map<std::string, std::map<size_t, WeightUse>>;

const Node *producer_node(const Graph &g, ValueId v) {
  int64_t p = g.value_info(v).producer;
  return p < 0 ? nullptr : &g.nodes()[static_cast<size_t>(p)];
}

/// How `body` reads its input `v` if only as a quantizable weight.
std::optional<WeightUse> weight_input_use(const Graph &body, ValueId v, const QuantizeWeightsOptions &options) {
  const TensorType &t = body.type_of(v);
  if (t.dtype != DType::f32 || t.rank() != 2 || !t.shape[0].is_static() || !t.shape[1].is_static())
    return std::nullopt;
  for (ValueId o : body.output_ids())
    if (o == v)
      return std::nullopt;
  std::vector<int64_t> ws = static_sizes(t.shape);
  std::optional<WeightUse> use;
  for (const Node &n : body.nodes())
    for (size_t j = 0; j < n.operands.size(); ++j) {
      if (n.operands[j] != v)
        continue;
      std::optional<WeightUse> u =
          j == 1 ? quantizable_use(n, body.type_of(n.operands[0]), t.dtype, ws, options) : std::nullopt;
      if (!u || (use && use->nk != u->nk))
        return std::nullopt;
      use = u;
    }
  return use;
}

ParamPlans plan_weight_inputs(const Graph &root, const QuantizeWeightsOptions &options) {
  ParamPlans plans;
  for (const auto &[name, body] : root.subgraphs())
    for (size_t i = 0; i < body->input_ids().size(); ++i)
      if (std::optional<WeightUse> use = weight_input_use(*body, body->input_ids()[i], options))
        plans[name][i] = *use;
  // Every invocation is a call passing a constant there.
  std::vector<const Graph *> graphs{&root};
  for (const auto &[name, body] : root.subgraphs())
    graphs.push_back(body.get());
  for (const Graph *g : graphs)
    for (const Node &n : g->nodes())
      for (const std::string &callee : body_names(n)) {
        auto it = plans.find(callee);
        if (it == plans.end())
          continue;
        std::map<size_t, WeightUse> &inputs = it->second;
        for (auto p = inputs.begin(); p != inputs.end();) {
          const Node *c = n.op == "call" && p->first < n.operands.size() ? producer_node(*g, n.operands[p->first]) : nullptr;
          p = c && c->op == "constant" ? std::next(p) : inputs.erase(p);
        }
        if (inputs.empty())
          plans.erase(it);
      }
  return plans;
}

/// Rebuilds graphs with their planned weight inputs quantized.
class WeightInputQuantizer {
public:
  WeightInputQuantizer(const ParamPlans &plans, const QuantizeWeightsOptions &options, std::vector<QuantizedLayer> *layers)
      : plans_(plans), options_(options), layers_(layers) {}

  /// `from` (a body when `mine` is its plan, else the root) into the empty `to`.
  void rebuild(const Graph &from, Graph &to, const std::map<size_t, WeightUse> *mine) {
    carry_symbols(from, to);
    std::string tag = ".q" + std::to_string(options_.bits);
    std::vector<size_t> first; // per input of `from`: its first input in `to`
    for (size_t i = 0; i < from.input_ids().size(); ++i) {
      const ValueInfo &info = from.value_info(from.input_ids()[i]);
      first.push_back(to.input_ids().size());
      auto p = mine ? mine->find(i) : std::map<size_t, WeightUse>::const_iterator{};
      if (!mine || p == mine->end()) {
        to.add_input(info.type, info.name);
        continue;
      }
      NbitsLayout l{p->second.k, p->second.n, options_.bits, options_.block};
      to.add_input(TensorType(DType::u8, {l.n, l.blocks(), l.blob_bytes()}), info.name + tag);
      to.add_input(TensorType(DType::f32, {l.n * l.blocks()}), info.name + tag + ".scales");
      if (!options_.symmetric)
        to.add_input(TensorType(DType::u8, {l.n * l.zp_row_bytes()}), info.name + tag + ".zero_points");
    }
    copy_constants(from, to, nullptr);
    GraphRealizationContext ctx(to);
    GraphRebuild rebuild(from, to);
    std::map<ValueId, std::pair<QuantizedOperands, WeightUse>> params;
    for (size_t i = 0; i < from.input_ids().size(); ++i) {
      auto input = [&](size_t k) { return Tensor::from_graph_value(to.value(to.input_ids()[first[i] + k])); };
      auto p = mine ? mine->find(i) : std::map<size_t, WeightUse>::const_iterator{};
      if (!mine || p == mine->end()) {
        rebuild.values()[from.input_ids()[i]] = input(0);
        continue;
      }
      QuantizedOperands q{input(0), input(1), {}};
      if (!options_.symmetric)
        q.zero_points = input(2);
      params.emplace(from.input_ids()[i], std::make_pair(q, p->second));
    }
    std::map<std::string, QuantizedOperands> arguments; // constants of `from` quantized, by name
    for (const Node &node : from.nodes()) {
      std::vector<Tensor> operands = rebuild.operands(node); // a planned input's entry is null
      auto param = node.operands.size() > 1 ? params.find(node.operands[1]) : params.end();
      if ((node.op == "matmul" || node.op == "linear") && param != params.end()) {
        const auto &[q, use] = param->second;
        NodeNameScope named(ctx, node.name); // a profile names the kernel after the node it replaces
        rebuild.define(node, {quantized_product(node, operands[0], q, use.k, use.n, options_, operands)});
        continue;
      }
      auto plan = node.op == "call" ? plans_.find(node.attrs.get_string("callee")) : plans_.end();
      if (plan == plans_.end()) {
        rebuild.define(node, copy_node(to, node, operands));
        continue;
      }
      std::vector<Tensor> args;
      for (size_t j = 0; j < node.operands.size(); ++j) {
        auto p = plan->second.find(j);
        if (p == plan->second.end()) {
          args.push_back(operands[j]);
          continue;
        }
        const std::string &weight = producer_node(from, node.operands[j])->attrs.get_string("name");
        auto done = arguments.find(weight);
        if (done == arguments.end()) {
          NbitsWeight q = quantize_matrix(from.constant(weight), p->second.nk, options_, layers_, weight, node.name);
          QuantizedOperands c = quantized_constants(q, weight, options_.bits); // realized: made constants here
          c.codes = ctx.add_source(c.codes);
          c.scales = ctx.add_source(c.scales);
          if (c.zero_points)
            c.zero_points = ctx.add_source(*c.zero_points);
          done = arguments.emplace(weight, c).first;
        }
        args.push_back(done->second.codes);
        args.push_back(done->second.scales);
        if (done->second.zero_points)
          args.push_back(*done->second.zero_points);
      }
      rebuild.define(node, copy_node(to, node, args));
    }
    rebuild.set_outputs();
  }

  /// `root` with every planned weight input quantized (the f32 weights'
  /// constant nodes left unread).
  std::unique_ptr<Graph> run(const Graph &root) {
    auto out = std::make_unique<Graph>(root.name());
    for (const Graph *sub : subgraphs_bodies_first(root)) { // a call's inference looks its callee up
      auto body = std::make_shared<Graph>(sub->name());
      out->add_subgraph(body);
      auto plan = plans_.find(sub->name());
      rebuild(*sub, *body, plan == plans_.end() ? nullptr : &plan->second);
    }
    rebuild(root, *out, nullptr);
    return out;
  }

private:
  const ParamPlans &plans_;
  QuantizeWeightsOptions options_;
  std::vector<QuantizedLayer> *layers_;
};

/// `from` copied into the empty `to` node for node, without the constants
/// no node reads any more (the f32 weights quantized away: the manifest and
/// header count every constant of the graph).
void copy_read_constants(const Graph &from, Graph &to) {
  carry_symbols(from, to);
  for (ValueId id : from.input_ids())
    to.add_input(from.value_info(id).type, from.value_info(id).name);
  std::set<std::string> read;
  for (const Node &n : from.nodes())
    if (n.op == "constant")
      read.insert(n.attrs.get_string("name"));
  copy_constants(from, to, &read);
  GraphRealizationContext ctx(to);
  GraphRebuild rebuild(from, to);
  rebuild.map_inputs();
  for (const Node &node : from.nodes()) {
    std::vector<ValueId> ids;
    for (const Tensor &t : rebuild.operands(node))
      ids.push_back(t.value().id());
    std::vector<Tensor> out;
    for (ValueId r : to.add_node(node.op, ids, node.attrs, node.name))
      out.push_back(Tensor::from_graph_value(to.value(r)));
    rebuild.define(node, out);
  }
  rebuild.set_outputs();
}

} // namespace

std::unique_ptr<Graph> quantize_weights(const Graph &graph, const QuantizeWeightsOptions &options,
                                        std::vector<QuantizedLayer> *layers) {
  // Weights passed to calls first, then the constants matmuls read.
  std::unique_ptr<Graph> calls;
  ParamPlans plans = plan_weight_inputs(graph, options);
  if (!plans.empty()) {
    calls = WeightInputQuantizer(plans, options, layers).run(graph);
    if (std::unique_ptr<Graph> pruned = without_dead_nodes(*calls)) // the f32 weights' constant nodes
      calls = std::move(pruned);
  }
  QuantizeMatmul matmul("matmul", options, layers), linear("linear", options, layers);
  std::unique_ptr<Graph> rewritten = apply_patterns(calls ? *calls : graph, {&matmul, &linear});
  if (!rewritten && !calls)
    return nullptr;
  const Graph &result = rewritten ? *rewritten : *calls;
  auto out = std::make_unique<Graph>(result.name());
  for (const Graph *sub : subgraphs_bodies_first(result)) { // a call's inference looks its callee up
    auto body = std::make_shared<Graph>(sub->name());
    out->add_subgraph(body);
    copy_read_constants(*sub, *body);
  }
  copy_read_constants(result, *out);
  return out;
}

int64_t quantize_weights_bits(const std::string &text) {
  if (text == "int8")
    return 8;
  if (text == "int4")
    return 4;
  throw Error(ErrorCode::InvalidArgument, "--quantize-weights: expected int8 or int4, got '" + text + "'");
}

} // namespace maxc
