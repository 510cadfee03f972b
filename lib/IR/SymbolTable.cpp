#include "maxc/IR/SymbolTable.h"

#include "maxc/Support/Error.h"

#include <algorithm>

namespace maxc {

const char *symbol_origin_name(SymbolOrigin origin) {
  switch (origin) {
  case SymbolOrigin::InputDim: return "input dim";
  case SymbolOrigin::DimArgument: return "dim argument";
  case SymbolOrigin::NodeResult: return "node result";
  }
  return "?";
}

const SymbolInfo &SymbolTable::declare(const std::string &name, SymbolOrigin origin, int64_t node, int64_t result) {
  (void)Dim(name); // throws for a name that is not an identifier
  auto [it, inserted] = symbols_.try_emplace(name);
  SymbolInfo &s = it->second;
  if (inserted) {
    s.name = name;
    s.origin = origin;
    s.node = origin == SymbolOrigin::NodeResult ? node : -1;
    s.result = origin == SymbolOrigin::NodeResult ? result : -1;
  } else if (s.origin != origin || (origin == SymbolOrigin::NodeResult && (s.node != node || s.result != result))) {
    throw Error(ErrorCode::InvalidGraph, "symbol '" + name + "' is already declared as " +
                                             symbol_origin_name(s.origin) + ", not " + symbol_origin_name(origin) +
                                             (origin == SymbolOrigin::NodeResult ? " (a symbol has one source)" : ""));
  }
  return s;
}

void SymbolTable::set_upper_bound(const std::string &name, int64_t bound) {
  auto it = symbols_.find(name);
  if (it == symbols_.end())
    throw Error(ErrorCode::InvalidArgument, "cannot bound '" + name + "': not a declared symbol");
  if (bound < 0)
    throw Error(ErrorCode::InvalidArgument,
                "cannot bound '" + name + "' by " + std::to_string(bound) + ": symbols are sizes (>= 0)");
  std::optional<int64_t> &ub = it->second.upper_bound;
  ub = ub ? std::min(*ub, bound) : bound;
}

const SymbolInfo *SymbolTable::find(const std::string &name) const {
  auto it = symbols_.find(name);
  return it == symbols_.end() ? nullptr : &it->second;
}

std::optional<int64_t> SymbolTable::upper_bound(const std::string &name) const {
  const SymbolInfo *s = find(name);
  return s ? s->upper_bound : std::nullopt;
}

std::vector<std::string> SymbolTable::names() const {
  std::vector<std::string> out;
  for (const auto &[name, info] : symbols_)
    out.push_back(name);
  return out;
}

// --- bounds of Dims ------------------------------------------------------
//
// Interval arithmetic over the atoms: a symbol lies in [0, its bound], an
// unknown end is nullopt (-inf below, +inf above), and an end that would
// overflow int64 becomes unknown. Every rule is conservative: the interval
// contains every value the Dim can take.

namespace {

using End = std::optional<int64_t>;
struct Range {
  End lo, hi;
};

End checked_mul(End a, End b) {
  int64_t r;
  if (!a || !b || __builtin_mul_overflow(*a, *b, &r))
    return std::nullopt;
  return r;
}

End checked_add(End a, End b) {
  int64_t r;
  if (!a || !b || __builtin_add_overflow(*a, *b, &r))
    return std::nullopt;
  return r;
}

int64_t floor_div(int64_t n, int64_t d) { // d > 0
  return n / d - (n % d < 0 ? 1 : 0);
}

Range range_of(const Dim &d, const SymbolTable &table);

Range multiply(const Range &a, const Range &b) {
  if (a.lo && *a.lo >= 0 && b.lo && *b.lo >= 0) // both non-negative: the common case
    return {checked_mul(a.lo, b.lo), checked_mul(a.hi, b.hi)};
  if (!a.lo || !a.hi || !b.lo || !b.hi)
    return {};
  End c[4] = {checked_mul(a.lo, b.lo), checked_mul(a.lo, b.hi), checked_mul(a.hi, b.lo), checked_mul(a.hi, b.hi)};
  if (std::any_of(std::begin(c), std::end(c), [](End e) { return !e; }))
    return {};
  return {std::min({*c[0], *c[1], *c[2], *c[3]}), std::max({*c[0], *c[1], *c[2], *c[3]})};
}

Range range_of(const DimAtom &a, const SymbolTable &table) {
  switch (a.kind()) {
  case DimAtom::Kind::Symbol:
    return {0, table.upper_bound(a.symbol())};
  case DimAtom::Kind::Min:
  case DimAtom::Kind::Max: {
    bool is_min = a.kind() == DimAtom::Kind::Min;
    // min: below by the lowest low (all needed), above by any high;
    // max: below by any low, above by the highest high (all needed).
    End all_lo = 0, all_hi = 0, any_lo, any_hi;
    bool first = true;
    for (const Dim &arg : a.args()) {
      Range r = range_of(arg, table);
      if (first) {
        all_lo = r.lo, all_hi = r.hi, any_lo = r.lo, any_hi = r.hi;
        first = false;
        continue;
      }
      all_lo = all_lo && r.lo ? End(is_min ? std::min(*all_lo, *r.lo) : std::max(*all_lo, *r.lo)) : std::nullopt;
      all_hi = all_hi && r.hi ? End(is_min ? std::min(*all_hi, *r.hi) : std::max(*all_hi, *r.hi)) : std::nullopt;
      if (r.lo)
        any_lo = any_lo ? (is_min ? std::min(*any_lo, *r.lo) : std::max(*any_lo, *r.lo)) : *r.lo;
      if (r.hi)
        any_hi = any_hi ? (is_min ? std::min(*any_hi, *r.hi) : std::max(*any_hi, *r.hi)) : *r.hi;
    }
    return is_min ? Range{all_lo, any_hi} : Range{any_lo, all_hi};
  }
  case DimAtom::Kind::FloorDiv: {
    // floor(n/d) for d >= 1 grows with n; a divisor's size pulls it
    // toward 0 (or -1), so each end takes the divisor end that widens it.
    Range n = range_of(a.args()[0], table), d = range_of(a.args()[1], table);
    int64_t dl = std::max<int64_t>(d.lo.value_or(1), 1);
    End dh = d.hi ? End(std::max<int64_t>(*d.hi, 1)) : std::nullopt;
    End lo, hi;
    if (n.lo)
      lo = *n.lo >= 0 ? (dh ? floor_div(*n.lo, *dh) : 0) : floor_div(*n.lo, dl);
    if (n.hi)
      hi = *n.hi >= 0 ? floor_div(*n.hi, dl) : (dh ? floor_div(*n.hi, *dh) : -1);
    return {lo, hi};
  }
  }
  return {};
}

Range range_of(const Dim &d, const SymbolTable &table) {
  Range total{0, 0};
  for (const DimTerm &t : d.terms()) {
    Range product{1, 1};
    for (const DimAtom &a : t.factors)
      product = multiply(product, range_of(a, table));
    Range term = t.coeff >= 0 ? Range{checked_mul(product.lo, t.coeff), checked_mul(product.hi, t.coeff)}
                              : Range{checked_mul(product.hi, t.coeff), checked_mul(product.lo, t.coeff)};
    total = {checked_add(total.lo, term.lo), checked_add(total.hi, term.hi)};
  }
  return total;
}

} // namespace

std::optional<int64_t> Dim::upper_bound(const SymbolTable &table) const { return range_of(*this, table).hi; }
std::optional<int64_t> Dim::lower_bound(const SymbolTable &table) const { return range_of(*this, table).lo; }

Dim bound_node_symbols(const Dim &d, const SymbolTable &table, const std::string &what) {
  std::map<std::string, Dim> bounds;
  for (const std::string &name : d.symbols()) {
    const SymbolInfo *info = table.find(name);
    if (!info || info->origin != SymbolOrigin::NodeResult)
      continue;
    if (!info->upper_bound)
      throw Error(ErrorCode::InvalidArgument, what + ": its size " + d.to_string() + " names '" + name +
                                                  "', defined by a node, which has no upper bound");
    bounds.emplace(name, Dim(*info->upper_bound));
  }
  if (bounds.empty())
    return d;
  bool monotone = true;
  for (const DimTerm &t : d.terms())
    for (const DimAtom &a : t.factors) {
      std::vector<std::string> names;
      if (a.is_symbol())
        names.push_back(a.symbol());
      else
        for (const Dim &arg : a.args())
          for (const std::string &n : arg.symbols())
            names.push_back(n);
      bool names_defined = std::any_of(names.begin(), names.end(), [&](const std::string &n) { return bounds.count(n); });
      if (names_defined && (!a.is_symbol() || t.coeff < 0))
        monotone = false;
    }
  if (monotone)
    return d.substitute(bounds);
  if (std::optional<int64_t> hi = d.upper_bound(table))
    return Dim(*hi);
  throw Error(ErrorCode::InvalidArgument, what + ": its size " + d.to_string() +
                                              " has no upper bound (a symbol defined by a node appears with a "
                                              "negative sign or inside min/max/floordiv)");
}

} // namespace maxc
