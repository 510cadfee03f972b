// maxc ops and maxc --version: what this build knows.
#include "Commands.h"

#include "maxc/Frontend/OpDocs.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Version.h"

#include <nlohmann/json.hpp>

#include <iostream>

namespace maxc::cli {

int print_version(bool json) {
  if (json) {
    nlohmann::ordered_json out{{"maxc", maxc_version()}, {"llvm", llvm_version()}, {"targets", llvm_targets()}};
    std::cout << out.dump(2) << "\n";
    return kSuccess;
  }
  std::cout << "maxc " << maxc_version() << "\n";
  std::cout << "LLVM " << llvm_version() << "\n";
  std::cout << "targets:";
  for (const std::string &t : llvm_targets())
    std::cout << " " << t;
  std::cout << "\n";
  return kSuccess;
}

int run_ops(const GlobalOptions &, bool json) {
  const auto ops = OpRegistry::instance().all();
  if (json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const OpDef *def : ops) {
      nlohmann::ordered_json attrs = nlohmann::ordered_json::array();
      for (const AttrSpec &a : def->attrs)
        attrs.push_back({{"name", a.name},
                         {"kind", std::string(attr_kind_name(a.kind))},
                         {"default", a.default_value ? attr_to_string(*a.default_value) : std::string()},
                         {"required", !a.default_value.has_value()}});
      list.push_back({{"name", def->name}, {"summary", def->summary}, {"signature", op_signature(def->name)},
                      {"min_operands", def->min_operands},
                      {"max_operands", def->max_operands}, {"attrs", attrs}});
    }
    std::cout << list.dump(2) << "\n";
    return kSuccess;
  }
  for (const OpDef *def : ops) {
    std::cout << def->name;
    for (const AttrSpec &a : def->attrs)
      std::cout << " " << a.name << "=" << (a.default_value ? attr_to_string(*a.default_value) : "<required>");
    std::cout << "\n    " << def->summary << "\n";
    if (std::string sig = op_signature(def->name); !sig.empty()) // operand order and dtypes (docs/ops.md)
      std::cout << "    " << sig << "\n";
  }
  return kSuccess;
}

} // namespace maxc::cli
