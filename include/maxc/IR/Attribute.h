// Op attributes: a small closed set of value kinds, stored in name order so
// printing and hashing are deterministic.
#pragma once

#include "maxc/IR/DType.h"
#include "maxc/IR/Dim.h"

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace maxc {

enum class AttrKind : uint8_t { boolean, integer, real, string, ints, reals, dtype, shape };

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, DType, Shape>;

std::string_view attr_kind_name(AttrKind kind);
AttrKind attr_kind_of(const AttrValue &value);
/// Text form used by the printer: `true`, `3`, `1.5`, `"tanh"`, `[1,2]`,
/// `[0.5,1]`, `f32`, `shape[batch,4]`.
std::string attr_to_string(const AttrValue &value);

/// An op's attributes by name.
class Attrs {
public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  bool has(const std::string &name) const { return values_.count(name) != 0; }
  void set(const std::string &name, AttrValue value) { values_[name] = std::move(value); }
  void erase(const std::string &name) { values_.erase(name); }
  const AttrValue *find(const std::string &name) const;

  /// Typed getters; throw maxc::Error (InvalidAttribute) on a missing
  /// attribute or a kind mismatch. get_int accepts booleans, get_real
  /// accepts integers.
  bool get_bool(const std::string &name) const;
  int64_t get_int(const std::string &name) const;
  double get_real(const std::string &name) const;
  const std::string &get_string(const std::string &name) const;
  std::vector<int64_t> get_ints(const std::string &name) const;
  std::vector<double> get_reals(const std::string &name) const;
  DType get_dtype(const std::string &name) const;
  const Shape &get_shape(const std::string &name) const;

  bool get_bool(const std::string &name, bool fallback) const { return has(name) ? get_bool(name) : fallback; }
  int64_t get_int(const std::string &name, int64_t fallback) const { return has(name) ? get_int(name) : fallback; }
  double get_real(const std::string &name, double fallback) const { return has(name) ? get_real(name) : fallback; }
  std::string get_string(const std::string &name, const std::string &fallback) const {
    return has(name) ? get_string(name) : fallback;
  }
  std::vector<int64_t> get_ints(const std::string &name, std::vector<int64_t> fallback) const {
    return has(name) ? get_ints(name) : fallback;
  }

  const std::map<std::string, AttrValue> &values() const { return values_; }
  bool empty() const { return values_.empty(); }
  bool operator==(const Attrs &o) const { return values_ == o.values_; }
  bool operator!=(const Attrs &o) const { return !(*this == o); }

  /// "{axis = 1, keepdims = true}" (empty string when there are none).
  std::string to_string() const;

private:
  std::map<std::string, AttrValue> values_;
};

} // namespace maxc
