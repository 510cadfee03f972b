// The `recurrence` op (LSTM/GRU/RNN directions, maxc/Ops/Recurrence.h): the
// CPU kernel (Cpu/RecurrenceEmitter: blocked R^T GEMV, vector gates; the
// same bits on 1, 2 and 3 threads) against
// the reference on random inputs (rtol 1e-4, atol 1e-5: f32 dot products and
// polynomial activations vs double), forward and reverse, lengths masks,
// batch > 1, GRU linear_before_reset, peepholes, clip, input_forget, other
// activations, hidden sizes that take the vector and the scalar paths, a
// symbolic length run at two lengths; the decomposition the GPU backends get
// (unrolled steps) against the reference too, and under GPU emulation.
#include "CompiledRunner.h"
#include "EmulatedRunner.h"

#include "maxc/Ops/Recurrence.h"
#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;

struct Case {
  std::string cell;
  int64_t seq, batch, hidden;
  bool reverse = false, masked = false, peephole = false, lbr = false, input_forget = false;
  double clip = -1;
  std::string acts;
  std::vector<double> alphas, betas;
};

std::string describe(const Case &c) {
  return c.cell + " S" + std::to_string(c.seq) + " B" + std::to_string(c.batch) + " H" + std::to_string(c.hidden) +
         (c.reverse ? " reverse" : "") + (c.masked ? " masked" : "") + (c.peephole ? " peephole" : "") +
         (c.lbr ? " lbr" : "") + (c.input_forget ? " input_forget" : "") + (c.clip >= 0 ? " clip" : "") + " " + c.acts;
}

Attrs attrs_of(const Case &c) {
  Attrs a{{"cell", c.cell},         {"reverse", c.reverse},       {"masked", c.masked},
          {"peephole", c.peephole}, {"linear_before_reset", c.lbr}, {"input_forget", c.input_forget},
          {"clip", c.clip},         {"activations", c.acts}};
  if (!c.alphas.empty())
    a.set("activation_alpha", c.alphas);
  if (!c.betas.empty())
    a.set("activation_beta", c.betas);
  return a;
}

/// Random operands of a case (lengths in [0, seq]), proj's length `seq`.
std::vector<HostTensor> operands(const Case &c, int64_t seq) {
  recurrence::Cell cell = recurrence::parse_cell(c.cell);
  int64_t h = c.hidden, gh = recurrence::gates_of(cell) * h, k = recurrence::block_of(h);
  std::vector<HostTensor> in = {random_tensor(DType::f32, {seq, c.batch, gh}, -1.5, 1.5),
                                random_tensor(DType::f32, {gh / k, h, k}, -0.4, 0.4),
                                random_tensor(DType::f32, {c.batch, h}, -1, 1)};
  if (cell == recurrence::Cell::lstm)
    in.push_back(random_tensor(DType::f32, {c.batch, h}, -1, 1));
  if (c.peephole)
    in.push_back(random_tensor(DType::f32, {3 * h}, -0.5, 0.5));
  if (c.lbr)
    in.push_back(random_tensor(DType::f32, {h}, -0.5, 0.5));
  if (c.masked) {
    HostTensor lens(DType::i64, {c.batch});
    for (int64_t b = 0; b < c.batch; ++b)
      lens.set_i64(b, (b * 7 + 3) % (seq + 1));
    in.push_back(lens);
  }
  return in;
}

BuildFn build(const Case &c) {
  return [c](const std::vector<Tensor> &x) { return ops::recurrence(x, attrs_of(c)); };
}

/// A graph whose sequence length is the symbol "seq".
std::unique_ptr<Graph> symbolic_graph(const Case &c) {
  std::vector<TensorType> types = types_of(operands(c, 1));
  types[0].shape[0] = Dim("seq");
  return trace_graph(types, build(c));
}

} // namespace

TEST_CASE("recurrence: the CPU kernel matches the reference", "[codegen][recurrence]") {
  std::vector<Case> cases = {
      {"lstm", 6, 1, 32},
      {"lstm", 3, 2, 192}, // 8 blocks of 96 columns
      {"lstm", 5, 3, 12, true, true, true, false, false, 0.9},
      {"lstm", 4, 2, 3, false, true, false, false, true},
      {"lstm", 3, 2, 16, false, false, false, false, false, -1, "HardSigmoid,Elu,Softplus", {0.3, 0.8}, {0.4}},
      {"gru", 6, 1, 32},
      {"gru", 3, 1, 256, false, false, false, true}, // blocks of 128, GEMVs over z|r and h
      {"gru", 5, 3, 12, true, true, false, true, false, 1.1},
      {"gru", 4, 2, 5, false, true, false, false},
      {"gru", 3, 2, 8, true, false, false, true, false, -1, "LeakyRelu,Softsign", {0.2}},
      {"rnn", 6, 1, 32},
      {"rnn", 5, 3, 12, true, true, false, false, false, 0.5, "Relu"},
      {"rnn", 3, 2, 4, false, false, false, false, false, -1, "ScaledTanh", {0.8}, {1.3}},
      {"rnn", 3, 2, 4, false, false, false, false, false, -1, "ThresholdedRelu", {0.1}},
      {"rnn", 3, 2, 4, false, false, false, false, false, -1, "Affine", {0.5}, {0.1}},
  };
  for (const Case &c : cases) {
    INFO(describe(c));
    std::vector<HostTensor> in = operands(c, c.seq);
    std::unique_ptr<Graph> traced = trace_graph(types_of(in), build(c));
    // The CPU keeps the node whole.
    std::unique_ptr<Graph> lowered = decompose(*traced, [] {
      DecomposeOptions o;
      o.keep_recurrence = true;
      return o;
    }());
    size_t whole = 0;
    for (const Node &n : lowered->nodes())
      whole += n.op == "recurrence";
    CHECK(whole == 1);
    std::vector<HostTensor> expected = Interpreter::run(*traced, in), got = run_compiled_threads(*traced, in);
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("result " << i);
      MAXC_REQUIRE_CLOSE(got[i], expected[i], kRtol, kAtol);
    }
    // What the GPU backends get: the steps unrolled into primitives.
    std::unique_ptr<Graph> unrolled = decompose(*traced);
    for (const Node &n : unrolled->nodes())
      REQUIRE(n.op != "recurrence");
    std::vector<HostTensor> steps = Interpreter::run(*unrolled, in);
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("unrolled result " << i);
      MAXC_REQUIRE_CLOSE(steps[i], expected[i], kRtol, kAtol);
    }
  }
}

TEST_CASE("recurrence: a symbolic length, one compiled kernel at two lengths", "[codegen][recurrence]") {
  for (const Case &c : {Case{"lstm", 0, 2, 16, false, true, true}, Case{"gru", 0, 1, 24, true}}) {
    INFO(describe(c));
    std::unique_ptr<Graph> graph = symbolic_graph(c);
    for (int64_t seq : {3, 9}) {
      INFO("seq " << seq);
      std::vector<HostTensor> in = operands(c, seq);
      std::vector<HostTensor> expected = Interpreter::run(*graph, in), got = run_compiled_threads(*graph, in);
      for (size_t i = 0; i < expected.size(); ++i)
        MAXC_REQUIRE_CLOSE(got[i], expected[i], kRtol, kAtol);
    }
    // Unrolling needs the length.
    try {
      decompose(*graph);
      FAIL("a symbolic length was unrolled");
    } catch (const Error &e) {
      CHECK(e.code() == ErrorCode::UnboundDim);
      CHECK(std::string(e.what()).find("--dim seq=N") != std::string::npos);
    }
  }
}

TEST_CASE("recurrence: GPU emulation runs the unrolled steps", "[codegen][recurrence][gpu]") {
  Case c{"lstm", 3, 2, 4, true, true, true, false, false, 0.8};
  std::vector<HostTensor> in = operands(c, c.seq);
  std::unique_ptr<Graph> graph = trace_graph(types_of(in), build(c));
  std::vector<HostTensor> expected = Interpreter::run(*graph, in), got = run_emulated(*graph, in, "gfx942");
  for (size_t i = 0; i < expected.size(); ++i)
    MAXC_REQUIRE_CLOSE(got[i], expected[i], kRtol, kAtol);
}

TEST_CASE("recurrence: bad operands are clear errors", "[ops][recurrence]") {
  Case c{"lstm", 2, 1, 4};
  std::vector<TensorType> types = types_of(operands(c, 2));
  auto expect = [&](std::vector<TensorType> t, const Attrs &a, const std::string &what) {
    try {
      trace_graph(t, [&](const std::vector<Tensor> &x) { return ops::recurrence(x, a); });
      FAIL("accepted: " << what);
    } catch (const Error &e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  expect(types, Attrs{{"cell", std::string("lstm")}, {"activations", std::string("Tanh,Gelu,Tanh")}}, "Gelu");
  expect(types, Attrs{{"cell", std::string("lstm")}, {"activations", std::string("Tanh")}}, "needs 3 activations");
  expect(types, Attrs{{"cell", std::string("cnn")}}, "cell 'cnn'");
  std::vector<TensorType> short_r = types;
  short_r[1] = TensorType(DType::f32, {Dim(1), Dim(4), Dim(4)});
  expect(short_r, Attrs{{"cell", std::string("lstm")}}, "r ");
  std::vector<TensorType> three = {types[0], types[1], types[2]};
  expect(three, Attrs{{"cell", std::string("lstm")}}, "takes 4 operands");
}
