// Dimensions: static sizes or symbolic expressions.
//
// A Dim is a polynomial with integer coefficients whose variables are
// *atoms*, kept in a canonical form so that equal expressions compare equal
// structurally:
//   Dim(5), Dim("batch"), Dim("batch") * 4 + Dim(1), Dim("batch") * Dim("seq").
// An atom is a symbol ("batch") or a *derived atom*: min/max of Dims or the
// floor division of a Dim by a Dim, kept opaque where it does not simplify
// ("max(a,b)", "floordiv(n,4)"). Derived atoms act like symbols inside
// monomials: "2*max(a,b)*seq+1" is a polynomial over {seq, max(a,b)}.
//
// Exact division (`/`, `exact_div`) is allowed only where it is exact (every
// coefficient divisible by a constant, or every term containing the divisor
// monomial); anything else is an error, never a silent floor. Floor division
// is the separate, explicit `floor_div`.
//
// Code that needs a Dim's structure reads `terms()` (and an atom's `kind()`,
// `symbol()`, `args()`); no code parses the text of `to_string()` except
// `Dim::parse`, which reads what `to_string` prints (JSON, manifests, CLI).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace maxc {

/// Values of symbolic dims at run time: "batch" → 8.
using DimBindings = std::map<std::string, int64_t>;

class Dim;
class SymbolTable;

/// A variable of a Dim's polynomial: a symbol, or a derived atom (min, max,
/// floordiv of Dims) that no rewriting reduced to a polynomial. Atoms order
/// symbols first (by name), then derived atoms by kind and operands.
class DimAtom {
public:
  enum class Kind { Symbol, Min, Max, FloorDiv };

  /// A symbol (an identifier; validated by Dim's constructor).
  explicit DimAtom(std::string symbol);
  /// A derived atom over `args` (min/max: two or more Dims, sorted and
  /// unique; floordiv: {numerator, divisor}). Use Dim::min/max/floor_div,
  /// which simplify first; this constructor takes the operands as they are.
  DimAtom(Kind kind, std::vector<Dim> args);

  Kind kind() const { return kind_; }
  bool is_symbol() const { return kind_ == Kind::Symbol; }
  /// The name of a symbol atom; throws maxc::Error for a derived atom.
  const std::string &symbol() const;
  /// The operands of a derived atom (empty for a symbol).
  const std::vector<Dim> &args() const;
  /// "batch", "min(a,b)", "max(a,b,c)", "floordiv(n+3,4)".
  std::string to_string() const;

  bool operator==(const DimAtom &o) const;
  bool operator!=(const DimAtom &o) const { return !(*this == o); }
  bool operator<(const DimAtom &o) const;

private:
  Kind kind_;
  std::string symbol_;
  std::shared_ptr<const std::vector<Dim>> args_; // derived atoms only (immutable, shared)
};

/// One term of a Dim: `coeff` times the product of `factors`.
struct DimTerm {
  int64_t coeff = 0;            // never 0 in a Dim's terms
  std::vector<DimAtom> factors; // sorted; repeats are powers; empty for the constant term
};

class Dim {
public:
  /// A static dim (implicit so that `{Dim("batch"), 5}` reads naturally).
  Dim(int64_t value = 0); // NOLINT(google-explicit-constructor)
  Dim(int value) : Dim(static_cast<int64_t>(value)) {} // NOLINT
  /// A symbolic dim named `symbol` (an identifier: [A-Za-z_][A-Za-z0-9_]*).
  Dim(const char *symbol);        // NOLINT
  Dim(const std::string &symbol); // NOLINT

  /// Parses the canonical text form ("batch", "4*seq+1", "batch*seq", "12",
  /// "max(a,b)", "floordiv(n+3,4)", "min(a,8)*b"; parentheses group).
  /// Accepts everything to_string prints. Throws maxc::Error on malformed text.
  static Dim parse(const std::string &text);

  bool is_static() const;
  /// The static value; throws maxc::Error if the dim is symbolic.
  int64_t value() const;
  /// True for a bare symbol ("batch"), the only symbolic form that inputs
  /// can bind at run time.
  bool is_symbol() const;
  /// The symbol of a bare-symbol dim.
  const std::string &symbol() const;
  /// Every symbol used (inside derived atoms too), sorted and unique.
  std::vector<std::string> symbols() const;

  /// The terms in the order to_string prints them: by descending degree,
  /// then canonical (atom) order; the constant term, if any, last. Empty
  /// for Dim(0). Code generators walk these (never the text).
  std::vector<DimTerm> terms() const;

  /// Canonical text: terms by descending degree then name, "2*seq+1".
  std::string to_string() const;

  /// Value under `bindings`; throws maxc::Error naming an unbound symbol,
  /// on overflow, or on a floordiv whose divisor is not positive.
  int64_t evaluate(const DimBindings &bindings) const;

  /// The largest / smallest value for any values of the symbols within
  /// `table`'s bounds (a symbol lies in [0, its upper bound]; an undeclared
  /// or unbounded one has no upper end). Conservative interval arithmetic
  /// through terms, min/max and floordiv; nullopt when unbounded or when an
  /// end overflows int64. Defined in SymbolTable.cpp.
  std::optional<int64_t> upper_bound(const SymbolTable &table) const;
  std::optional<int64_t> lower_bound(const SymbolTable &table) const;

  /// This Dim with each symbol of `values` replaced by its Dim (inside
  /// min/max/floordiv atoms too), simplified as the operators do.
  Dim substitute(const std::map<std::string, Dim> &values) const;

  friend Dim operator+(const Dim &a, const Dim &b);
  friend Dim operator-(const Dim &a, const Dim &b);
  friend Dim operator*(const Dim &a, const Dim &b);
  /// Exact division; nullopt when the quotient is not a polynomial.
  std::optional<Dim> exact_div(const Dim &divisor) const;
  /// Exact division that throws maxc::Error when not exact.
  friend Dim operator/(const Dim &a, const Dim &b);

  /// The smaller / larger of the operands, as values for every binding of
  /// the symbols. Simplifies where the answer does not depend on the
  /// bindings: nested min (max) flatten, equal operands collapse, and an
  /// operand whose difference to another is a constant is kept only if it
  /// can win ("max(n,n+1)" is "n+1", "min(4,7)" is 4). Otherwise a derived
  /// atom over the sorted, unique operands. Throws on an empty list.
  static Dim min(const Dim &a, const Dim &b);
  static Dim max(const Dim &a, const Dim &b);
  static Dim min(const std::vector<Dim> &operands);
  static Dim max(const std::vector<Dim> &operands);

  /// floor(a / divisor) for a divisor that is positive at run time.
  /// A static divisor must be positive (maxc::Error otherwise). Simplifies:
  /// both static → the value; exact division → the quotient; by a constant
  /// k every coefficient is split as k*q + r with 0 <= r < k, the multiples
  /// leave the floor ("floordiv(4*n+5,4)" is "n+1+floordiv(1,4)" = "n+1"),
  /// a common factor of the remainder and k cancels, and a floordiv of a
  /// floordiv divides once by the product. What remains is a derived atom
  /// "floordiv(r,k)". Evaluating a floordiv whose divisor is not positive
  /// throws.
  static Dim floor_div(const Dim &a, const Dim &divisor);
  /// ceil(a / divisor) = -floor_div(-a, divisor), same conditions.
  static Dim ceil_div(const Dim &a, const Dim &divisor);

  bool operator==(const Dim &o) const { return terms_ == o.terms_; }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  bool operator<(const Dim &o) const { return terms_ < o.terms_; }

private:
  // Monomial: sorted atoms (repeats = powers). Coefficients never 0.
  using Monomial = std::vector<DimAtom>;
  std::map<Monomial, int64_t> terms_;

  /// The single atom of a Dim that is exactly one atom with coefficient 1.
  const DimAtom *as_atom() const;
  static Dim atom(DimAtom a);
  static Dim min_max(DimAtom::Kind kind, const std::vector<Dim> &operands);
};

using Shape = std::vector<Dim>;

/// "[batch,5]".
std::string shape_to_string(const Shape &shape);
/// Product of all dims (1 for rank 0).
Dim shape_numel(const Shape &shape);
bool shape_is_static(const Shape &shape);
/// Static sizes; throws maxc::Error if any dim is symbolic.
std::vector<int64_t> static_sizes(const Shape &shape);
/// Evaluates every dim.
std::vector<int64_t> evaluate_shape(const Shape &shape, const DimBindings &bindings);
Shape make_shape(const std::vector<int64_t> &sizes);

} // namespace maxc
