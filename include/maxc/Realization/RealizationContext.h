// The realization-context interface and the thread-local stack of contexts.
//
// Constructing a context makes it the current one on this thread; destroying
// it restores the previous one (RAII, Python's `with`). Every Tensor
// operation records through RealizationContext::current().
#pragma once

#include "maxc/IR/Attribute.h"
#include "maxc/Tensor/Tensor.h"

#include <string>
#include <vector>

namespace maxc {

class RealizationContext {
public:
  RealizationContext();
  virtual ~RealizationContext();
  RealizationContext(const RealizationContext &) = delete;
  RealizationContext &operator=(const RealizationContext &) = delete;

  /// The innermost live context on this thread, or nullptr.
  static RealizationContext *current();
  /// The current context; throws maxc::Error (NoContext) naming `what` when
  /// there is none.
  static RealizationContext &require_current(const std::string &what);

  /// Records `op` applied to `operands` and returns its results.
  virtual std::vector<Tensor> record(const std::string &op, const std::vector<Tensor> &operands,
                                     const Attrs &attrs = {}) = 0;
  /// Realizes one tensor recorded by this context.
  virtual void realize(const Tensor &tensor) = 0;
  /// Realizes every live tensor recorded by this context.
  virtual void realize_all() = 0;

  /// Name prefix of this context ("layers.3"); names recorded here are
  /// relative to it.
  virtual const std::string &prefix() const = 0;
  /// `prefix + "." + name` (or `name` when the prefix is empty).
  std::string qualify(const std::string &name) const;
};

/// Records a single-result op in the current context.
Tensor record_op(const std::string &op, const std::vector<Tensor> &operands, const Attrs &attrs = {});
/// Records a multi-result op in the current context.
std::vector<Tensor> record_op_multi(const std::string &op, const std::vector<Tensor> &operands,
                                    const Attrs &attrs = {});

} // namespace maxc
