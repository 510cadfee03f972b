#include "TestUtil.h"

#include "maxc/IR/GraphSymbols.h"
#include "maxc/IR/SymbolTable.h"

using namespace maxc;

TEST_CASE("symbol tables record origins and bounds", "[ir][symbols]") {
  SymbolTable t;
  t.declare("batch", SymbolOrigin::InputDim);
  t.declare("batch", SymbolOrigin::InputDim); // again: kept
  t.declare("cache", SymbolOrigin::DimArgument);
  t.declare("count", SymbolOrigin::NodeResult, 3, 1);
  CHECK(t.size() == 3);
  CHECK(t.names() == std::vector<std::string>{"batch", "cache", "count"});
  REQUIRE(t.find("count"));
  CHECK(t.find("count")->origin == SymbolOrigin::NodeResult);
  CHECK(t.find("count")->node == 3);
  CHECK(t.find("count")->result == 1);
  CHECK(t.find("batch")->node == -1);
  CHECK_FALSE(t.contains("seq"));
  CHECK_FALSE(t.upper_bound("batch"));
  t.set_upper_bound("batch", 64);
  t.set_upper_bound("batch", 128); // the tighter bound stays
  CHECK(t.upper_bound("batch") == 64);
  CHECK(std::string(symbol_origin_name(SymbolOrigin::DimArgument)) == "dim argument");
  MAXC_REQUIRE_ERROR(t.declare("batch", SymbolOrigin::NodeResult, 0, 0), ErrorCode::InvalidGraph,
                     "already declared as input dim");
  MAXC_REQUIRE_ERROR(t.declare("count", SymbolOrigin::NodeResult, 4, 0), ErrorCode::InvalidGraph, "one source");
  MAXC_REQUIRE_ERROR(t.set_upper_bound("seq", 4), ErrorCode::InvalidArgument, "not a declared symbol");
  MAXC_REQUIRE_ERROR(t.set_upper_bound("cache", -1), ErrorCode::InvalidArgument, ">= 0");
  MAXC_REQUIRE_ERROR(t.declare("2x", SymbolOrigin::InputDim), ErrorCode::InvalidArgument, "invalid dim symbol");
}

TEST_CASE("dim bounds follow the symbols' bounds", "[ir][symbols][dim]") {
  SymbolTable t;
  t.declare("b", SymbolOrigin::InputDim);
  t.declare("s", SymbolOrigin::InputDim);
  t.declare("u", SymbolOrigin::DimArgument); // unbounded
  t.set_upper_bound("b", 8);
  t.set_upper_bound("s", 100);
  Dim b("b"), s("s"), u("u");
  CHECK(Dim(7).upper_bound(t) == 7);
  CHECK(b.upper_bound(t) == 8);
  CHECK(b.lower_bound(t) == 0);
  CHECK_FALSE(u.upper_bound(t));
  CHECK(Dim("undeclared").lower_bound(t) == 0);
  CHECK_FALSE(Dim("undeclared").upper_bound(t));
  CHECK((b * s * 4 + 63).upper_bound(t) == 8 * 100 * 4 + 63);
  CHECK((s - b).upper_bound(t) == 100);   // the negative term at its smallest (b = 0)
  CHECK((s - b).lower_bound(t) == -8);
  CHECK((b - u).upper_bound(t) == 8);     // -u is at most 0 even unbounded
  CHECK_FALSE((b - u).lower_bound(t));
  CHECK_FALSE((b * u).upper_bound(t));
  CHECK(Dim::max(b * 4, s).upper_bound(t) == 100);
  CHECK(Dim::max(b, u).lower_bound(t) == 0);
  CHECK_FALSE(Dim::max(b, u).upper_bound(t));
  CHECK(Dim::min(b, u).upper_bound(t) == 8); // min is below any bounded operand
  CHECK(Dim::min(s, b * 20).upper_bound(t) == 100);
  CHECK(Dim::floor_div(s + 3, 4).upper_bound(t) == 25);
  CHECK(Dim::floor_div(s, b).upper_bound(t) == 100); // divisor >= 1
  CHECK(Dim::floor_div(s, b + 1).lower_bound(t) == 0);
  CHECK(Dim::floor_div(s - 150, 4).upper_bound(t) == -13);
  CHECK(Dim::floor_div(s - 150, u).upper_bound(t) == -1);
  CHECK(Dim::ceil_div(s, 4).upper_bound(t) == 100); // s - floordiv(3*s,4): conservative, yet bounded
  // Overflow makes an end unknown, never wrong.
  t.declare("huge", SymbolOrigin::DimArgument);
  t.set_upper_bound("huge", int64_t(1) << 62);
  CHECK_FALSE((Dim("huge") * 4).upper_bound(t));
  // Exhaustive check on small ranges: every value lies within the bounds.
  SymbolTable small;
  small.declare("x", SymbolOrigin::InputDim);
  small.declare("y", SymbolOrigin::InputDim);
  small.set_upper_bound("x", 6);
  small.set_upper_bound("y", 5);
  Dim x("x"), y("y");
  for (const Dim &d : {x * y - x * 3 + 2, Dim::max(x - 4, y * 2 - 9), Dim::min(x * y, 7) - y,
                       Dim::floor_div(x * 3 - 10, 4), Dim::floor_div(x - 3, y + 1), Dim::ceil_div(x * 5, 3) - x}) {
    INFO(d.to_string());
    std::optional<int64_t> lo = d.lower_bound(small), hi = d.upper_bound(small);
    REQUIRE(lo);
    REQUIRE(hi);
    for (int64_t xv = 0; xv <= 6; ++xv)
      for (int64_t yv = 0; yv <= 5; ++yv) {
        int64_t v = d.evaluate({{"x", xv}, {"y", yv}});
        CHECK(*lo <= v);
        CHECK(v <= *hi);
      }
  }
}

TEST_CASE("the root graph's symbol table agrees with dim_symbols", "[ir][symbols]") {
  Graph g("g");
  g.add_input(TensorType(DType::f32, {Dim("batch"), Dim("seq") * 2}), "x");
  g.add_input(TensorType(DType::f32, {Dim("batch"), 4}), "y");
  // Only bare-symbol dims of inputs are input dims.
  CHECK(g.symbol_table().names() == std::vector<std::string>{"batch"});
  CHECK(g.symbol_table().find("batch")->origin == SymbolOrigin::InputDim);
  g.symbol_table().set_upper_bound("batch", 32);
  SymbolTable all = model_symbols(g);
  CHECK(all.names() == dim_symbols(g));
  CHECK(all.find("seq")->origin == SymbolOrigin::DimArgument); // no input shape binds it alone
  CHECK(all.upper_bound("batch") == 32);
}

TEST_CASE("graph JSON carries the symbol table where it says more than the inputs", "[ir][symbols][json]") {
  Graph g("g");
  ValueId x = g.add_input(TensorType(DType::f32, {Dim("batch"), 4}), "x");
  g.set_outputs({x});
  std::string plain = graph_to_json(g);
  CHECK(plain.find("\"symbols\"") == std::string::npos); // nothing beyond the input dims: unchanged output
  g.symbol_table().set_upper_bound("batch", 64);
  g.symbol_table().declare("cache", SymbolOrigin::DimArgument);
  g.symbol_table().declare("count", SymbolOrigin::NodeResult, 0, 0);
  g.symbol_table().set_upper_bound("count", 9);
  std::string text = graph_to_json(g);
  CHECK(text.find("\"symbols\"") != std::string::npos);
  auto back = graph_from_json(text);
  const SymbolTable &t = back->symbol_table();
  CHECK(t.names() == std::vector<std::string>{"batch", "cache", "count"});
  CHECK(t.find("batch")->origin == SymbolOrigin::InputDim);
  CHECK(t.upper_bound("batch") == 64);
  CHECK(t.find("cache")->origin == SymbolOrigin::DimArgument);
  CHECK_FALSE(t.upper_bound("cache"));
  CHECK(t.find("count")->origin == SymbolOrigin::NodeResult);
  CHECK(t.find("count")->node == 0);
  CHECK(t.upper_bound("count") == 9);
  CHECK(graph_to_json(*back) == text);
  auto bad = [&](const std::string &from, const std::string &to) {
    std::string s = text;
    size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  MAXC_REQUIRE_ERROR(graph_from_json(bad("\"dim_argument\"", "\"guess\"")), ErrorCode::InvalidGraph,
                     "unknown symbol origin");
  MAXC_REQUIRE_ERROR(graph_from_json(bad("\"max\": 64", "\"max\": -1")), ErrorCode::InvalidGraph,
                     "non-negative integer");
}
