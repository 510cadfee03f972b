#include "maxc/IR/Attribute.h"

#include "maxc/Support/Error.h"

#include <cmath>
#include <cstdio>

namespace maxc {

std::string_view attr_kind_name(AttrKind kind) {
  switch (kind) {
  case AttrKind::boolean: return "bool";
  case AttrKind::integer: return "int";
  case AttrKind::real: return "float";
  case AttrKind::string: return "string";
  case AttrKind::ints: return "int list";
  case AttrKind::reals: return "float list";
  case AttrKind::dtype: return "dtype";
  case AttrKind::shape: return "shape";
  }
  return "?";
}

AttrKind attr_kind_of(const AttrValue &value) { return static_cast<AttrKind>(value.index()); }

// Shortest text that parses back to the same double.
static std::string real_to_string(double v) {
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  if (std::isnan(v))
    return "nan";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0"; // keep reals visibly real
  return s;
}

std::string attr_to_string(const AttrValue &value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return real_to_string(d); }
    std::string operator()(const std::string &s) const {
      std::string out = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\')
          out += '\\';
        out += c;
      }
      return out + "\"";
    }
    std::string operator()(const std::vector<int64_t> &v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i)
        out += (i ? "," : "") + std::to_string(v[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<double> &v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i)
        out += (i ? "," : "") + real_to_string(v[i]);
      return out + "]";
    }
    std::string operator()(DType d) const { return std::string(dtype_name(d)); }
    std::string operator()(const Shape &s) const { return "shape" + shape_to_string(s); }
  };
  return std::visit(Visitor{}, value);
}

const AttrValue *Attrs::find(const std::string &name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

static Error attr_error(const std::string &name, const char *expected, const AttrValue *found) {
  if (!found)
    return Error(ErrorCode::InvalidAttribute, "missing attribute '" + name + "'");
  return Error(ErrorCode::InvalidAttribute, "attribute '" + name + "' must be " + expected + ", got " +
                                                std::string(attr_kind_name(attr_kind_of(*found))) + " " +
                                                attr_to_string(*found));
}

template <typename T> static const T *get_as(const Attrs &attrs, const std::string &name) {
  const AttrValue *v = attrs.find(name);
  return v ? std::get_if<T>(v) : nullptr;
}

bool Attrs::get_bool(const std::string &name) const {
  if (auto *b = get_as<bool>(*this, name))
    return *b;
  throw attr_error(name, "a bool", find(name));
}

int64_t Attrs::get_int(const std::string &name) const {
  if (auto *i = get_as<int64_t>(*this, name))
    return *i;
  if (auto *b = get_as<bool>(*this, name))
    return *b;
  throw attr_error(name, "an integer", find(name));
}

double Attrs::get_real(const std::string &name) const {
  if (auto *d = get_as<double>(*this, name))
    return *d;
  if (auto *i = get_as<int64_t>(*this, name))
    return static_cast<double>(*i);
  throw attr_error(name, "a number", find(name));
}

const std::string &Attrs::get_string(const std::string &name) const {
  if (auto *s = get_as<std::string>(*this, name))
    return *s;
  throw attr_error(name, "a string", find(name));
}

std::vector<int64_t> Attrs::get_ints(const std::string &name) const {
  if (auto *v = get_as<std::vector<int64_t>>(*this, name))
    return *v;
  if (auto *i = get_as<int64_t>(*this, name))
    return {*i};
  // An empty list parses as reals or ints depending on the source; accept it.
  if (auto *r = get_as<std::vector<double>>(*this, name); r && r->empty())
    return {};
  throw attr_error(name, "a list of integers", find(name));
}

std::vector<double> Attrs::get_reals(const std::string &name) const {
  if (auto *v = get_as<std::vector<double>>(*this, name))
    return *v;
  if (auto *v = get_as<std::vector<int64_t>>(*this, name))
    return std::vector<double>(v->begin(), v->end());
  throw attr_error(name, "a list of numbers", find(name));
}

DType Attrs::get_dtype(const std::string &name) const {
  if (auto *d = get_as<DType>(*this, name))
    return *d;
  if (auto *s = get_as<std::string>(*this, name))
    if (auto d = parse_dtype(*s))
      return *d;
  throw attr_error(name, "a dtype", find(name));
}

const Shape &Attrs::get_shape(const std::string &name) const {
  if (auto *s = get_as<Shape>(*this, name))
    return *s;
  throw attr_error(name, "a shape", find(name));
}

std::string Attrs::to_string() const {
  if (values_.empty())
    return "";
  std::string out = "{";
  bool first = true;
  for (const auto &[name, value] : values_) {
    out += (first ? "" : ", ") + name + " = " + attr_to_string(value);
    first = false;
  }
  return out + "}";
}

} // namespace maxc
