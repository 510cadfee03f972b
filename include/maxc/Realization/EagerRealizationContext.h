// EagerRealizationContext: records ops like a graph context, but realizes
// them through the reference interpreter — when a tensor's realize() is
// called, when realize_all() is called, and for every live tensor when the
// context goes out of scope. Eager debugging, and the reference that compiled
// kernels are tested against.
#pragma once

#include "maxc/Realization/RealizationContext.h"

#include <memory>
#include <optional>
#include <vector>

namespace maxc {

/// Computes every node of `graph` from `first_node` on whose results are not
/// in `env` yet. The reference interpreter (lib/Interpreter, a layer above
/// Realization) installs itself here (lib/Interpreter/InstallInterpreter.cpp).
using GraphExecutor = void (*)(const Graph &graph, std::vector<std::optional<HostTensor>> &env, DimBindings &dims,
                               size_t first_node);
void set_eager_executor(GraphExecutor executor);

class EagerRealizationContext : public RealizationContext {
public:
  explicit EagerRealizationContext(std::string prefix = {});
  /// Realizes every live tensor it recorded (errors are swallowed here, since
  /// destructors must not throw; call realize_all() to see them).
  ~EagerRealizationContext() override;

  std::vector<Tensor> record(const std::string &op, const std::vector<Tensor> &operands,
                             const Attrs &attrs = {}) override;
  void realize(const Tensor &tensor) override;
  void realize_all() override;
  const std::string &prefix() const override { return prefix_; }

  /// The graph recorded so far (for inspection and tests).
  const Graph &graph() const { return graph_; }

private:
  /// Runs every node not yet computed.
  void compute_pending();

  Graph graph_;
  std::string prefix_;
  std::vector<std::optional<HostTensor>> computed_; // by ValueId
  size_t computed_nodes_ = 0;
  std::vector<std::weak_ptr<Tensor::Impl>> live_;
};

} // namespace maxc
