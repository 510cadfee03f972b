// Dimensions: static sizes or symbolic expressions.
//
// A Dim is a polynomial with integer coefficients over named symbols, kept in
// a canonical form so that equal expressions compare equal structurally:
//   Dim(5), Dim("batch"), Dim("batch") * 4 + Dim(1), Dim("batch") * Dim("seq").
// Division is allowed only where it is exact (every coefficient divisible by
// a constant, or every term containing the divisor monomial); anything else
// is an error, never a silent floor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace maxc {

/// Values of symbolic dims at run time: "batch" → 8.
using DimBindings = std::map<std::string, int64_t>;

class Dim {
public:
  /// A static dim (implicit so that `{Dim("batch"), 5}` reads naturally).
  Dim(int64_t value = 0); // NOLINT(google-explicit-constructor)
  Dim(int value) : Dim(static_cast<int64_t>(value)) {} // NOLINT
  /// A symbolic dim named `symbol` (an identifier: [A-Za-z_][A-Za-z0-9_]*).
  Dim(const char *symbol);        // NOLINT
  Dim(const std::string &symbol); // NOLINT

  /// Parses the canonical text form ("batch", "4*seq+1", "batch*seq", "12").
  /// Throws maxc::Error on malformed text.
  static Dim parse(const std::string &text);

  bool is_static() const;
  /// The static value; throws maxc::Error if the dim is symbolic.
  int64_t value() const;
  /// True for a bare symbol ("batch"), the only symbolic form that inputs
  /// can bind at run time.
  bool is_symbol() const;
  /// The symbol of a bare-symbol dim.
  const std::string &symbol() const;
  /// Every symbol used, sorted and unique.
  std::vector<std::string> symbols() const;

  /// Canonical text: terms by descending degree then name, "2*seq+1".
  std::string to_string() const;

  /// Value under `bindings`; throws maxc::Error naming an unbound symbol or
  /// on overflow.
  int64_t evaluate(const DimBindings &bindings) const;

  friend Dim operator+(const Dim &a, const Dim &b);
  friend Dim operator-(const Dim &a, const Dim &b);
  friend Dim operator*(const Dim &a, const Dim &b);
  /// Exact division; nullopt when the quotient is not a polynomial.
  std::optional<Dim> exact_div(const Dim &divisor) const;
  /// Exact division that throws maxc::Error when not exact.
  friend Dim operator/(const Dim &a, const Dim &b);

  bool operator==(const Dim &o) const { return terms_ == o.terms_; }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  bool operator<(const Dim &o) const { return terms_ < o.terms_; }

private:
  // Monomial: sorted symbol names (repeats = powers). Coefficients never 0.
  using Monomial = std::vector<std::string>;
  std::map<Monomial, int64_t> terms_;
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
