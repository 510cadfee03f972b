#include "maxc/Transforms/CallSites.h"

#include "maxc/Ops/OpRegistry.h"

#include <set>

namespace maxc {

namespace {

bool is_constant_node(const Graph &g, ValueId id) {
  const ValueInfo &info = g.value_info(id);
  return info.producer >= 0 && g.nodes()[info.producer].op == "constant";
}

/// Bodies owned by ops other than `call`, anywhere in the model.
std::set<std::string> non_call_bodies(const Graph &root) {
  std::set<std::string> out;
  auto scan = [&](const Graph &g) {
    for (const Node &n : g.nodes())
      if (!is_call(n))
        for (const std::string &body : body_names(n))
          out.insert(body);
  };
  scan(root);
  for (const auto &[name, sub] : root.subgraphs())
    scan(*sub);
  return out;
}

std::map<std::string, std::vector<bool>> root_calls(const Graph &root) {
  std::map<std::string, std::vector<bool>> bound;
  std::set<std::string> excluded = non_call_bodies(root);
  for (const Node &n : root.nodes()) {
    const std::string *callee = call_body_name(n);
    if (!callee)
      continue;
    auto [it, fresh] = bound.try_emplace(*callee, n.operands.size(), true);
    if (it->second.size() != n.operands.size()) { // a malformed graph: leave it alone
      excluded.insert(*callee);
      continue;
    }
    for (size_t i = 0; i < n.operands.size(); ++i)
      it->second[i] = it->second[i] && is_constant_node(root, n.operands[i]);
  }
  // Called from a subgraph body: its operands there are not root constants.
  for (const auto &[name, sub] : root.subgraphs())
    for (const Node &n : sub->nodes())
      if (const std::string *callee = call_body_name(n))
        excluded.insert(*callee);
  for (const auto &[name, sub] : root.subgraphs())
    if (auto it = bound.find(name); it != bound.end() && it->second.size() != sub->input_ids().size())
      excluded.insert(name);
  for (const std::string &name : excluded)
    bound.erase(name);
  return bound;
}

std::map<std::string, std::vector<bool>> transitive(const Graph &root) {
  // Start from "every input is bound to a constant" and clear what a call
  // site contradicts until nothing changes (a definition passing its own
  // input on keeps the callee's input constant only while it is).
  std::map<std::string, std::vector<bool>> out;
  std::set<std::string> other_bodies = non_call_bodies(root);
  for (const auto &[name, sub] : root.subgraphs())
    out[name].assign(sub->input_ids().size(), !other_bodies.count(name));
  std::vector<std::pair<const Graph *, const std::vector<bool> *>> callers{{&root, nullptr}};
  for (const auto &[name, sub] : root.subgraphs())
    callers.push_back({sub.get(), &out[name]});
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto &[g, own] : callers) {
      std::map<ValueId, size_t> input_index;
      for (size_t i = 0; i < g->input_ids().size(); ++i)
        input_index[g->input_ids()[i]] = i;
      for (const Node &n : g->nodes()) {
        const std::string *body = call_body_name(n);
        if (!body)
          continue;
        auto callee = out.find(*body);
        if (callee == out.end())
          continue;
        for (size_t i = 0; i < n.operands.size() && i < callee->second.size(); ++i) {
          ValueId v = n.operands[i];
          auto in = input_index.find(v);
          bool constant = is_constant_node(*g, v) || (own && in != input_index.end() && (*own)[in->second]);
          if (!constant && callee->second[i]) {
            callee->second[i] = false;
            changed = true;
          }
        }
      }
    }
  }
  return out;
}

} // namespace

std::map<std::string, std::vector<bool>> constant_bound_inputs(const Graph &root, CallSiteScope scope) {
  return scope == CallSiteScope::RootCalls ? root_calls(root) : transitive(root);
}

} // namespace maxc
