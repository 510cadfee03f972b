#include "maxc/Transforms/Inline.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Transforms/Rewrite.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace maxc {

namespace {

/// Which calls of the root `graph` are inlined: their callees by name.
class InlinePlan {
public:
  explicit InlinePlan(const Graph &graph) : graph_(graph) {
    auto scan = [&](const Graph &g) {
      for (const Node &n : g.nodes()) {
        if (const std::string *callee = call_body_name(n))
          ++sites_[*callee];
        else
          for (const std::string &body : body_names(n))
            other_bodies_.insert(body);
      }
    };
    scan(graph);
    for (const auto &[name, sub] : graph.subgraphs())
      scan(*sub);
  }

  /// The callee to inline at root node `n`, or null.
  const Graph *callee(const Node &n) const {
    const std::string *name = call_body_name(n);
    if (!name || sites_.at(*name) != 1 || other_bodies_.count(*name))
      return nullptr;
    const Graph *body = graph_.find_subgraph(*name);
    if (!body || body->input_ids().size() != n.operands.size() || body->output_ids().size() != n.results.size())
      return nullptr;
    for (size_t i = 0; i < n.operands.size(); ++i)
      if (body->type_of(body->input_ids()[i]) != graph_.type_of(n.operands[i]))
        return nullptr;
    for (size_t i = 0; i < n.results.size(); ++i)
      if (body->type_of(body->output_ids()[i]) != graph_.type_of(n.results[i]))
        return nullptr;
    for (const Node &b : body->nodes())
      if (defines_symbol(b))
        return nullptr;
    return body;
  }

private:
  const Graph &graph_;
  std::map<std::string, size_t> sites_;
  std::set<std::string> other_bodies_;
};

/// `from`'s nodes, all of them, into `to` (whose interface is `from`'s).
void copy_nodes(const Graph &from, Graph &to) {
  GraphRealizationContext ctx(to); // Tensor::from_graph_value needs one
  GraphRebuild rebuild(from, to);
  rebuild.map_inputs();
  for (const Node &n : from.nodes())
    rebuild.define(n, copy_node(to, n, rebuild.operands(n)));
  rebuild.set_outputs();
}

/// `body`'s nodes recorded into `to` on `args` (values of `to`); its results.
std::vector<Tensor> paste(const Graph &body, Graph &to, const std::vector<Tensor> &args) {
  GraphRebuild inner(body, to);
  for (size_t i = 0; i < args.size(); ++i)
    inner.values()[body.input_ids()[i]] = args[i];
  for (const Node &b : body.nodes()) {
    if (b.op != "constant") {
      inner.define(b, copy_node(to, b, inner.operands(b)));
      continue;
    }
    const std::string &name = b.attrs.get_string("name");
    std::string stored = body.transposed_source(name) ? to.add_transposed_constant(name, *body.transposed_source(name))
                                                      : to.add_constant(name, body.constant(name));
    Node renamed = b;
    renamed.attrs.set("name", stored);
    renamed.name = stored;
    inner.define(b, copy_node(to, renamed, {}));
  }
  std::vector<Tensor> results;
  for (ValueId o : body.output_ids())
    results.push_back(inner.values().at(o));
  return results;
}

} // namespace

std::unique_ptr<Graph> inline_single_calls(const Graph &graph, size_t *inlined) {
  InlinePlan plan(graph);
  std::set<std::string> gone;
  for (const Node &n : graph.nodes())
    if (const Graph *body = plan.callee(n))
      gone.insert(body->name());
  if (inlined)
    *inlined = gone.size();
  if (gone.empty())
    return nullptr;
  auto out = std::make_unique<Graph>(graph.name());
  for (const Graph *sub : subgraphs_bodies_first(graph)) { // a node's bodies before it
    if (gone.count(sub->name()))
      continue;
    auto body = std::make_shared<Graph>(sub->name());
    out->add_subgraph(body);
    copy_interface(*sub, *body);
    copy_nodes(*sub, *body);
  }
  copy_interface(graph, *out);
  GraphRealizationContext ctx(*out);
  GraphRebuild rebuild(graph, *out);
  rebuild.map_inputs();
  for (const Node &n : graph.nodes()) {
    std::vector<Tensor> operands = rebuild.operands(n);
    const Graph *body = plan.callee(n);
    rebuild.define(n, body ? paste(*body, *out, operands) : copy_node(*out, n, operands));
  }
  rebuild.set_outputs();
  return out;
}

} // namespace maxc
