#include "maxc/Transforms/MatmulLayout.h"

#include "maxc/Ops/Ops.h"

#include <cstring>

namespace maxc {

Tensor transposed_constant(const Graph &from, const std::string &name, GraphRealizationContext &ctx) {
  const HostTensor &w = from.constant(name);
  std::vector<int64_t> shape = w.shape();
  size_t r = shape.size();
  std::swap(shape[r - 1], shape[r - 2]);
  HostTensor t(w.dtype(), shape);
  int64_t rows = w.shape()[r - 2], cols = w.shape()[r - 1], batches = w.numel() / std::max<int64_t>(rows * cols, 1);
  size_t es = dtype_size(w.dtype());
  for (int64_t b = 0; b < batches && rows * cols > 0; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        std::memcpy(t.data() + ((b * cols + j) * rows + i) * es, w.data() + ((b * rows + i) * cols + j) * es, es);
  return ctx.add_source(Tensor::from_host(t), name + ".T");
}

std::vector<Tensor> rewrite_matmul_layout(const Graph &from, const Node &node, const std::vector<Tensor> &operands,
                                          GraphRealizationContext &ctx) {
  if (node.op != "matmul")
    return {};
  bool flags[2] = {node.attrs.get_bool("transpose_a"), node.attrs.get_bool("transpose_b")};
  if (!flags[0] && !flags[1])
    return {};
  Tensor in[2] = {operands[0], operands[1]};
  for (int i = 0; i < 2; ++i) {
    if (!flags[i])
      continue;
    const ValueInfo &info = from.value_info(node.operands[i]);
    if (info.producer >= 0 && from.nodes()[info.producer].op == "constant") {
      in[i] = transposed_constant(from, from.nodes()[info.producer].attrs.get_string("name"), ctx);
      continue;
    }
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < in[i].rank(); ++d)
      perm.push_back(d);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    in[i] = ops::transpose(in[i], perm);
  }
  return {ops::matmul(in[0], in[1])};
}

} // namespace maxc
