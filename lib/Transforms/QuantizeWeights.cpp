#include "maxc/Transforms/QuantizeWeights.h"

#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Support/Error.h"
#include "maxc/Transforms/Rewrite.h"

#include <cmath>
#include <set>

namespace maxc {

namespace {

class QuantizeMatmul : public RewritePattern {
public:
  QuantizeMatmul(const char *op, const QuantizeWeightsOptions &options, std::vector<QuantizedLayer> *layers)
      : op_(op), options_(options), layers_(layers) {}
  const char *name() const override { return "quantize-weights"; }
  const char *root_op() const override { return op_; }

  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &operands, RewriteContext &rc) const override {
    bool linear = node.op == "linear";
    if (!linear && (node.attrs.get_bool("transpose_a") || operands.size() != 2))
      return {};
    const Node *p = rc.match.producer_op(node.operands[1], "constant");
    if (!p)
      return {};
    const std::string &cname = p->attrs.get_string("name");
    const HostTensor &w = rc.match.graph().constant(cname);
    const Tensor &a = operands[0];
    if (w.dtype() != DType::f32 || w.rank() != 2 || a.dtype() != DType::f32 || a.rank() < 1)
      return {};
    // w_nk: [N, K] (linear's weight and a transposed B as they are).
    bool nk = linear || node.attrs.get_bool("transpose_b");
    int64_t k = nk ? w.shape()[1] : w.shape()[0], n = nk ? w.shape()[0] : w.shape()[1];
    if (k < options_.block || k * n < kMinQuantizedElements || (!linear && a.rank() < 2))
      return {};
    std::vector<float> wnk(static_cast<size_t>(k * n));
    const float *src = w.data_as<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        wnk[i * k + j] = nk ? src[i * k + j] : src[j * n + i];
    NbitsLayout l{k, n, options_.bits, options_.block};
    NbitsWeight q = quantize_nbits(wnk.data(), l, options_.symmetric);
    if (layers_) {
      std::vector<float> back = dequantize_nbits(l, q.b.data_as<uint8_t>(), q.scales.data_as<float>(),
                                                 q.zero_points.valid() ? q.zero_points.data_as<uint8_t>() : nullptr);
      double err = 0, norm = 0;
      for (size_t i = 0; i < back.size(); ++i) {
        double d = static_cast<double>(back[i]) - wnk[i];
        err += d * d;
        norm += static_cast<double>(wnk[i]) * wnk[i];
      }
      layers_->push_back({cname, node.name, k, n, norm > 0 ? std::sqrt(err / norm) : std::sqrt(err)});
    }
    std::string tag = ".q" + std::to_string(options_.bits);
    std::optional<Tensor> zp;
    if (q.zero_points.valid())
      zp = Tensor::from_host(q.zero_points, cname + tag + ".zero_points");
    Tensor y = ops::matmul_nbits(a, Tensor::from_host(q.b, cname + tag), Tensor::from_host(q.scales, cname + tag + ".scales"),
                                 zp, k, n, options_.bits, options_.block);
    if (linear && operands.size() > 2)
      y = y + operands[2];
    return {y};
  }

private:
  const char *op_;
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
  for (const auto &[name, data] : from.constant_types()) {
    if (!read.count(name))
      continue;
    if (const HostTensor *source = from.transposed_source(name))
      to.add_transposed_constant(name, *source);
    else
      to.add_constant(name, data);
  }
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
  QuantizeMatmul matmul("matmul", options, layers), linear("linear", options, layers);
  std::unique_ptr<Graph> rewritten = apply_patterns(graph, {&matmul, &linear});
  if (!rewritten)
    return nullptr;
  auto out = std::make_unique<Graph>(rewritten->name());
  for (const Graph *sub : subgraphs_bodies_first(*rewritten)) { // a call's inference looks its callee up
    auto body = std::make_shared<Graph>(sub->name());
    out->add_subgraph(body);
    copy_read_constants(*sub, *body);
  }
  copy_read_constants(*rewritten, *out);
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
