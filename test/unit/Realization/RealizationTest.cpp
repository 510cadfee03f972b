// The seed's semantics: graph contexts record and refuse to realize, sources
// become constants, prefixes qualify names, contexts nest.
#include "TestUtil.h"

using namespace maxc;
using namespace maxc::test;

TEST_CASE("the README example compiles and behaves as commented", "[realization]") {
  maxc::Graph graph("my_model", {maxc::TensorType(maxc::DType::f32, {maxc::Dim("batch"), 5})});
  {
    maxc::GraphRealizationContext ctx(graph); // becomes the current context until scope exit
    CHECK(RealizationContext::current() == &ctx);
    maxc::Tensor x = maxc::Tensor::from_graph_value(graph.inputs()[0]);
    maxc::Tensor y = x + 1; // records an op; computes nothing
    CHECK_FALSE(y.is_realized());
    graph.output({y});
    REQUIRE_THROWS_AS(ctx.realize_all(), maxc::RealizationError);
    try {
      ctx.realize_all();
    } catch (const RealizationError &e) {
      CHECK_THAT(e.message(), Catch::Matchers::Contains("cannot realize"));
    }
    REQUIRE_THROWS_AS(y.realize(), maxc::RealizationError);
    REQUIRE_THROWS_AS(y.host(), maxc::RealizationError);
  }
  CHECK(RealizationContext::current() == nullptr);
  CHECK(graph.nodes().size() == 2); // full (the scalar 1) and add
  HostTensor in = random_tensor(DType::f32, {3, 5});
  HostTensor out = Interpreter::run(graph, {in})[0];
  for (int64_t i = 0; i < 15; ++i)
    CHECK(out.data_as<float>()[i] == in.data_as<float>()[i] + 1.0f);
}

TEST_CASE("ops without a context fail clearly", "[realization]") {
  Tensor a = Tensor::from_f64(DType::f32, {2}, {1, 2});
  MAXC_REQUIRE_ERROR(a + a, ErrorCode::NoContext, "no realization context is active");
}

TEST_CASE("add_source embeds a constant, not an input", "[realization]") {
  Graph graph("g", {TensorType(DType::f32, {3})});
  GraphRealizationContext ctx(graph, {}, "encoder");
  Tensor w = Tensor::from_f64(DType::f32, {3}, {1, 2, 3});
  Tensor c = ctx.add_source(w, "scale");
  CHECK(graph.input_ids().size() == 1);
  CHECK(graph.has_constant("encoder.scale"));
  CHECK_FALSE(c.is_realized());
  Tensor m = ctx.add_mutable_source(w, "scale");
  CHECK(graph.constants().size() == 1); // same storage, stored once
  // A realized tensor from outside used in an op becomes a constant too.
  Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
  Tensor named = Tensor::from_f64(DType::f32, {3}, {4, 5, 6}).set_name("bias");
  Tensor y = x * c + named;
  CHECK(graph.has_constant("encoder.bias"));
  CHECK(graph.input_ids().size() == 1);
  graph.output({y});
  HostTensor out = Interpreter::run(graph, {HostTensor::from_f64(DType::f32, {3}, {1, 1, 2})})[0];
  CHECK(out.to_f64() == std::vector<double>{5, 7, 12});
  (void)m;
}

TEST_CASE("nested contexts restore the previous one", "[realization]") {
  Graph outer_graph("outer"), inner_graph("inner");
  CHECK(RealizationContext::current() == nullptr);
  {
    GraphRealizationContext outer(outer_graph);
    {
      EagerRealizationContext eager;
      CHECK(RealizationContext::current() == &eager);
      {
        GraphRealizationContext inner(inner_graph, {}, "p");
        CHECK(RealizationContext::current() == &inner);
        CHECK(inner.prefix() == "p");
        CHECK(inner.qualify("w") == "p.w");
      }
      CHECK(RealizationContext::current() == &eager);
    }
    CHECK(RealizationContext::current() == &outer);
  }
  CHECK(RealizationContext::current() == nullptr);
}

TEST_CASE("a tensor from another graph context is rejected", "[realization]") {
  Graph g1("g1", {TensorType(DType::f32, {2})}), g2("g2", {TensorType(DType::f32, {2})});
  GraphRealizationContext c1(g1);
  Tensor x1 = Tensor::from_graph_value(g1.inputs()[0]);
  GraphRealizationContext c2(g2);
  Tensor x2 = Tensor::from_graph_value(g2.inputs()[0]);
  MAXC_REQUIRE_ERROR(x1 + x2, ErrorCode::ForeignValue, "another realization context");
}

TEST_CASE("eager contexts realize through the interpreter", "[realization][eager]") {
  Tensor y, z;
  {
    EagerRealizationContext eager;
    Tensor a = Tensor::from_f64(DType::f32, {3}, {1, 2, 3});
    y = ops::exp(a) * 2.0;
    CHECK_FALSE(y.is_realized());
    y.realize();
    CHECK(y.is_realized());
    CHECK(y.host().get_f64(1) == Approx(2 * std::exp(2.0)));
    z = y - 1.0; // uses a realized tensor: enters as a constant
  }
  // Scope exit realized the rest.
  CHECK(z.is_realized());
  CHECK(z.host().get_f64(0) == static_cast<float>(static_cast<float>(2 * std::exp(1.0)) - 1.0));
}

TEST_CASE("sharded tensors record one op per shard and allreduce", "[realization]") {
  Graph graph("g", {TensorType(DType::f32, {2}, DeviceRef::gpu(0)), TensorType(DType::f32, {2}, DeviceRef::gpu(1)),
                    TensorType(DType::i8, {16})});
  GraphRealizationContext ctx(graph, {}, "");
  Tensor sharded = ctx.create_unrealized({graph.inputs()[0], graph.inputs()[1]}, {DeviceRef::gpu(0), DeviceRef::gpu(1)});
  CHECK(sharded.is_sharded());
  Tensor doubled = sharded * sharded;
  CHECK(doubled.values().size() == 2);
  CHECK(doubled.device_mapping()[1] == DeviceRef::gpu(1));
  Tensor total = ops::allreduce_sum(doubled);
  graph.output({total.values()[0], total.values()[1]});
  auto out = Interpreter::run(graph, {HostTensor::from_f64(DType::f32, {2}, {1, 2}),
                                      HostTensor::from_f64(DType::f32, {2}, {3, 4}), HostTensor(DType::i8, {16})});
  CHECK(out[0].to_f64() == std::vector<double>{10, 20});
  CHECK(out[1].to_f64() == std::vector<double>{10, 20});
  MAXC_REQUIRE_ERROR(ops::allreduce_sum(Tensor::from_graph_value(graph.inputs()[0])), ErrorCode::InvalidArgument,
                     "sharded");
}

TEST_CASE("interpreter binds symbolic dims and checks inputs", "[interpreter]") {
  Graph graph("g", {TensorType(DType::f32, {Dim("batch"), 2}), TensorType(DType::f32, {Dim("batch"), 2})});
  {
    GraphRealizationContext ctx(graph);
    graph.output({Tensor::from_graph_value(graph.inputs()[0]) + Tensor::from_graph_value(graph.inputs()[1])});
  }
  CHECK(Interpreter::run(graph, {HostTensor(DType::f32, {3, 2}), HostTensor(DType::f32, {3, 2})})[0].shape() ==
        std::vector<int64_t>{3, 2});
  MAXC_REQUIRE_ERROR(Interpreter::run(graph, {HostTensor(DType::f32, {3, 2}), HostTensor(DType::f32, {4, 2})}),
                     ErrorCode::InputMismatch, "'batch' is already 3");
  MAXC_REQUIRE_ERROR(Interpreter::run(graph, {HostTensor(DType::f32, {3, 3}), HostTensor(DType::f32, {3, 3})}),
                     ErrorCode::InputMismatch, "must be f32[batch,2]");
  MAXC_REQUIRE_ERROR(Interpreter::run(graph, {HostTensor(DType::f64, {3, 2}), HostTensor(DType::f32, {3, 2})}),
                     ErrorCode::InputMismatch, "input 0");
  MAXC_REQUIRE_ERROR(Interpreter::run(graph, {}), ErrorCode::InputMismatch, "takes 2 inputs");
}
