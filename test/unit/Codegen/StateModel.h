// A small model with state in maxc's JSON format (docs/model-format.md
// "state"): x [seq, 3] appended, doubled, to the state buffer k [ctx, 3] at
// row `past`; the output adds the sum of every filled row. Shared by the
// tests of the state API (StateTest, GpuLoadTest).
#pragma once

namespace maxc::test {

inline const char *kJsonStateModel = R"({
  "maxc": 1, "name": "cache",
  "inputs": [{"name": "x", "dtype": "f32", "shape": ["seq", 3]},
             {"name": "k", "dtype": "f32", "shape": ["ctx", 3]}],
  "state": {"buffers": ["k"], "length": "past", "advance": "seq"},
  "main": [
    {"rows": ["mul", "x", 2.0]},
    {"all": ["buffer_append", "k", "rows", {"offset": ["past"]}]},
    {"y": ["sum", "all", {"axes": [0], "keepdims": true}]},
    {"out": ["add", "x", "y"]}
  ],
  "outputs": ["out"]
})";

} // namespace maxc::test
