#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "hlo/hash.h"
#include "plugin_path.h"

namespace tpu::hlo {
namespace {

using tpu::testing::shared_client;

TensorType f32(std::vector<int64_t> dims) { return TensorType{ElementType::F32, std::move(dims)}; }

// Compiles `builder`'s module returning `result`, runs it on f32 inputs, returns the output.
std::vector<float> run(
    const Builder& builder, const Value& result,
    const std::vector<std::pair<std::vector<float>, std::vector<int64_t>>>& inputs) {
  auto executable = shared_client().compile(builder.module_text({result}));
  std::vector<pjrt::BufferPtr> buffers;
  std::vector<PJRT_Buffer*> raw;
  for (const auto& [data, dims] : inputs) {
    buffers.push_back(shared_client().buffer_from_host(data.data(), PJRT_Buffer_Type_F32, dims, 0));
    raw.push_back(buffers.back()->get());
  }
  auto outputs = executable->execute(raw, shared_client().device(0));
  std::vector<float> out(result.type.num_elements());
  outputs.at(0)->to_host(out.data(), out.size() * sizeof(float));
  return out;
}

TEST(Types, Names) {
  EXPECT_EQ(f32({2, 3}).str(), "tensor<2x3xf32>");
  EXPECT_EQ((TensorType{ElementType::Pred, {}}).str(), "tensor<i1>");
  EXPECT_EQ(byte_size(ElementType::BF16), 2u);
  EXPECT_EQ(i64_array({}), "array<i64>");
  EXPECT_EQ(i64_array({1, 2}), "array<i64: 1, 2>");
}

TEST(Builder, PrintsGenericOps) {
  Builder b;
  Value x = b.parameter(f32({2}));
  Value y = b.binary("add", x, x);
  std::string text = b.module_text({y});
  EXPECT_NE(
      text.find(
          "%0 = \"stablehlo.add\"(%arg0, %arg0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>)"),
            std::string::npos)
      << text;
}

TEST(Builder, SameStructureSameText) {
  auto make = [](int64_t n) {
    Builder b;
    Value x = b.parameter(f32({n}));
    return b.module_text({b.unary("exponential", x)});
  };
  EXPECT_EQ(make(3), make(3));
  EXPECT_NE(make(3), make(4));
}

// The NaN fix of XLA:CPU's min/max is its own switch: the CPU plugin needs it also when the
// speed shortcuts (set_for_xla_cpu) are off, and accelerators need neither.
TEST(Builder, NanPropagatingMinMaxIsIndependentOfTheSpeedShortcuts) {
  for (bool shortcuts : {false, true}) {
    for (bool nan_fix : {false, true}) {
      Builder b;
      b.set_for_xla_cpu(shortcuts);
      b.set_nan_propagating_min_max(nan_fix);
      std::string text =
          b.module_text({b.binary("maximum", b.parameter(f32({4})), b.parameter(f32({4})))});
      EXPECT_EQ(text.find("stablehlo.select") != std::string::npos, nan_fix)
          << "shortcuts " << shortcuts << ", NaN fix " << nan_fix << ":\n"
          << text;
    }
  }
}

TEST(Hash, StructuralHashFollowsStructure) {
  auto program = [](int64_t n, const char* op) {
    Builder b;
    Value x = b.parameter(f32({n}));
    return b.module_text({b.unary(op, x)});
  };
  EXPECT_EQ(structural_hash(program(3, "negate")), structural_hash(program(3, "negate")));
  EXPECT_NE(structural_hash(program(3, "negate")), structural_hash(program(4, "negate")));
  EXPECT_NE(structural_hash(program(3, "negate")), structural_hash(program(3, "sine")));
  // Fixed by definition (FNV-1a), so the same in every process and build.
  EXPECT_EQ(structural_hash(""), 14695981039346656037ULL);
  EXPECT_EQ(structural_hash_hex("a"), "af63dc4c8601ec8c");
}

TEST(Builder, TypeMismatchIsRejectedBeforeThePlugin) {
  Builder b;
  Value x = b.parameter(f32({2}));
  Value y = b.parameter(f32({3}));
  EXPECT_THROW(b.binary("add", x, y), std::invalid_argument);
  EXPECT_THROW(b.reshape(x, {3}), std::invalid_argument);
}

// Each branch names values of the enclosing function; only the chosen one runs.
TEST(Builder, IfElseRunsTheChosenBranch) {
  for (float sign : {1.0f, -1.0f}) {
    Builder b;
    Value x = b.parameter(f32({3}));
    Value first = b.reshape(b.slice(x, {0}, {1}, {1}), {});
    Value positive = b.compare(Compare::GT, first, b.constant(0, ElementType::F32));
    Value y = b.if_else(
        positive, {x.type}, [&](Builder& t) { return std::vector<Value>{t.binary("add", x, x)}; },
        [&](Builder& f) { return std::vector<Value>{f.unary("negate", x)}; })[0];
    auto values = run(b, y, {{{sign * 1, 2, 3}, {3}}});
    EXPECT_EQ(values, sign > 0 ? (std::vector<float>{2, 4, 6}) : (std::vector<float>{1, -2, -3}));
  }
}

// Two ifs in one function, a reduce (with its own region) inside a branch, and an if inside a
// reduce's region: names stay unique and captured values resolve.
TEST(Builder, IfElseNestsWithRegions) {
  Builder b;
  Value x = b.parameter(f32({3}));
  Value yes =
      b.compare(Compare::GT, b.constant(1, ElementType::F32), b.constant(0, ElementType::F32));
  Value total = b.if_else(
      yes, {f32({})},
      [&](Builder& t) {
        return std::vector<Value>{
            t.reduce(x, t.constant(0, ElementType::F32), Reduction::Add, {0})};
      },
      [&](Builder& f) { return std::vector<Value>{f.constant(-1, ElementType::F32)}; })[0];
  std::string body = b.region({f32({}), f32({})}, [](Builder& r, const std::vector<Value>& a) {
    Value larger = r.compare(Compare::GT, a[0], a[1]);
    return r.if_else(
        larger, {a[0].type}, [&](Builder&) { return std::vector<Value>{a[0]}; },
        [&](Builder&) { return std::vector<Value>{a[1]}; });
  });
  Value largest = b.op("reduce", {x, b.constant(-1e30, ElementType::F32)}, f32({}),
                       "dimensions = array<i64: 0>", body);
  Value twice = b.if_else(
      yes, {f32({})},
      [&](Builder& t) { return std::vector<Value>{t.binary("add", total, largest)}; },
      [&](Builder&) { return std::vector<Value>{total}; })[0];
  auto values = run(b, b.reshape(twice, {1}), {{{1, 5, 3}, {3}}});
  EXPECT_EQ(values, (std::vector<float>{14}));
}

TEST(Builder, IfElseChecksItsPredicateAndBranchTypes) {
  Builder b;
  Value x = b.parameter(f32({2}));
  Value pred =
      b.compare(Compare::GT, b.constant(1, ElementType::F32), b.constant(0, ElementType::F32));
  auto same = [&](Builder&) { return std::vector<Value>{x}; };
  auto other = [&](Builder& r) { return std::vector<Value>{r.reshape(x, {2, 1})}; };
  EXPECT_THROW(b.if_else(x, {x.type}, same, same), std::invalid_argument);  // not a scalar i1
  EXPECT_THROW(b.if_else(pred, {x.type}, same, other), std::invalid_argument);
  EXPECT_THROW(b.if_else(pred, {x.type, x.type}, same, same), std::invalid_argument);
  EXPECT_THROW(b.if_else(pred, {}, same, same), std::invalid_argument);
}

TEST(Builder, DotGeneralMatmul) {
  Builder b;
  Value x = b.parameter(f32({2, 3}));
  Value y = b.parameter(f32({3, 2}));
  Value z = b.dot_general(x, y, {}, {}, {1}, {0}, ElementType::F32);
  EXPECT_EQ(z.dims(), (std::vector<int64_t>{2, 2}));
  auto out = run(b, z, {{{1, 2, 3, 4, 5, 6}, {2, 3}}, {{1, 0, 0, 1, 1, 1}, {3, 2}}});
  EXPECT_EQ(out, (std::vector<float>{4, 5, 10, 11}));
}

TEST(Builder, DotPrecisionFollowsTheSetting) {
  for (auto [precision, expected] : {std::pair{MatmulPrecision::Highest, "precision HIGHEST"},
                                     std::pair{MatmulPrecision::High, "precision HIGH>"},
                                     std::pair{MatmulPrecision::Default, ""}}) {
    Builder b;
    b.set_matmul_precision(precision);
    Value x = b.parameter(f32({2, 3}));
    Value y = b.parameter(f32({3, 2}));
    Value z = b.dot_general(x, y, {}, {}, {1}, {0}, ElementType::F32);
    std::string text = b.module_text({z});
    if (*expected == '\0') {
      EXPECT_EQ(text.find("precision_config"), std::string::npos);
    } else {
      EXPECT_NE(text.find(expected), std::string::npos) << text;
    }
    EXPECT_EQ(run(b, z, {{{1, 2, 3, 4, 5, 6}, {2, 3}}, {{1, 0, 0, 1, 1, 1}, {3, 2}}}),
              (std::vector<float>{4, 5, 10, 11}));
  }
  Builder half;  // bfloat16 dots carry no precision: it only concerns float32
  Value a = half.parameter(TensorType{ElementType::BF16, {2, 2}});
  Value c = half.dot_general(a, a, {}, {}, {1}, {0}, ElementType::BF16);
  EXPECT_EQ(half.module_text({c}).find("precision_config"), std::string::npos);
}

TEST(Builder, HostMatmulReplacesPlainProductsOnly) {
  auto target_of = [](Builder& b, const Value& z) {
    std::string text = b.module_text({z});
    size_t at = text.find("call_target_name = \"");
    if (at == std::string::npos) {
      return std::string(text.find("dot_general") != std::string::npos ? "dot" : "?");
    }
    at += 20;
    return text.substr(at, text.find('"', at) - at);
  };
  {
    Builder b;
    b.set_host_matmul(true);
    Value x = b.parameter(f32({4, 3}));
    Value y = b.parameter(f32({3, 5}));
    Value z = b.dot_general(x, y, {}, {}, {1}, {0}, ElementType::F32);
    EXPECT_EQ(z.dims(), (std::vector<int64_t>{4, 5}));
    EXPECT_EQ(target_of(b, z), "torch_tpu.host_matmul_nn");
  }
  {  // transposed operands are read in place: the custom call takes the transpose's input
    Builder b;
    b.set_host_matmul(true);
    Value xt = b.parameter(f32({3, 4}));
    Value y = b.parameter(f32({5, 3}));
    Value z = b.dot_general(b.transpose(xt, {1, 0}), b.transpose(y, {1, 0}), {}, {}, {1}, {0},
                            ElementType::F32);
    EXPECT_EQ(z.dims(), (std::vector<int64_t>{4, 5}));
    EXPECT_EQ(target_of(b, z), "torch_tpu.host_matmul_tt");
    std::string text = b.module_text({z});
    EXPECT_NE(text.find("custom_call\"(%arg0, %arg1)"), std::string::npos) << text;
  }
  {  // batched, with only the right-hand side transposed
    Builder b;
    b.set_host_matmul(true);
    Value x = b.parameter(TensorType{ElementType::F64, {2, 4, 3}});
    Value yt = b.parameter(TensorType{ElementType::F64, {2, 5, 3}});
    Value z = b.dot_general(x, b.transpose(yt, {0, 2, 1}), {0}, {0}, {2}, {1}, ElementType::F64);
    EXPECT_EQ(z.dims(), (std::vector<int64_t>{2, 4, 5}));
    EXPECT_EQ(target_of(b, z), "torch_tpu.host_matmul_nt");
  }
  // Left to dot_general: the switch off, integers, mixed result types, empty operands, a
  // transpose that is not of the last two dimensions, contractions other than a product's.
  auto stays_dot = [&](bool on, TensorType lhs, TensorType rhs, ElementType result,
                       std::vector<int64_t> lhs_contract = {1},
                       std::vector<int64_t> rhs_contract = {0}) {
    Builder b;
    b.set_host_matmul(on);
    Value z = b.dot_general(b.parameter(lhs), b.parameter(rhs), {}, {}, lhs_contract, rhs_contract,
                            result);
    return target_of(b, z) == "dot";
  };
  EXPECT_TRUE(stays_dot(false, f32({4, 3}), f32({3, 5}), ElementType::F32));
  EXPECT_TRUE(stays_dot(true, TensorType{ElementType::S32, {4, 3}},
                        TensorType{ElementType::S32, {3, 5}}, ElementType::S32));
  EXPECT_TRUE(stays_dot(true, TensorType{ElementType::BF16, {4, 3}},
                        TensorType{ElementType::BF16, {3, 5}}, ElementType::F32));
  EXPECT_TRUE(stays_dot(true, f32({0, 3}), f32({3, 5}), ElementType::F32));
  EXPECT_TRUE(stays_dot(true, f32({3, 4}), f32({3, 5}), ElementType::F32, {0}, {0}));
  EXPECT_TRUE(stays_dot(true, f32({4}), f32({4}), ElementType::F32, {0}, {0}));
  {  // batch dimensions other than the first stay dot_general
    Builder c;
    c.set_host_matmul(true);
    Value x = c.parameter(TensorType{ElementType::F32, {4, 2, 3}});
    Value y = c.parameter(TensorType{ElementType::F32, {3, 2, 5}});
    Value z = c.dot_general(x, y, {1}, {1}, {2}, {0}, ElementType::F32);
    EXPECT_EQ(target_of(c, z), "dot");
  }
  Builder b;
  b.set_host_matmul(true);
  Value x = b.parameter(TensorType{ElementType::F32, {3, 2, 4}});
  Value y = b.parameter(TensorType{ElementType::F32, {2, 4, 5}});
  Value moved = b.transpose(x, {1, 0, 2});  // [2, 3, 4]: not a swap of the last two
  Value z = b.dot_general(moved, y, {0}, {0}, {2}, {1}, ElementType::F32);
  EXPECT_EQ(target_of(b, z), "torch_tpu.host_matmul_nn");
  EXPECT_NE(b.module_text({z}).find("custom_call\"(%0, %arg1)"), std::string::npos);
}

TEST(Builder, CallsAFunctionAddedToTheModule) {
  Callee twice{"ext_twice", std::make_shared<const std::string>(
                                "  func.func private @ext_twice(%a: tensor<3xf32>) -> "
                                "tensor<3xf32> {\n"
                                "    %0 = stablehlo.add %a, %a : tensor<3xf32>\n"
                                "    func.return %0 : tensor<3xf32>\n  }\n")};
  Builder b;
  Value x = b.parameter(f32({3}));
  Value once = b.call(twice, {x}, {f32({3})})[0];
  Value again = b.call(twice, {once}, {f32({3})})[0];
  ASSERT_EQ(b.callees().size(), 1u);  // one definition however often it is called
  std::string text = b.module_text({again});
  EXPECT_EQ(text.find("@ext_twice("), text.rfind("@ext_twice("));
  EXPECT_EQ(run(b, again, {{{1, 2, 3}, {3}}}), (std::vector<float>{4, 8, 12}));
}

TEST(Builder, ReduceTransposeBroadcastSlice) {
  Builder b;
  Value x = b.parameter(f32({2, 3}));
  Value t = b.transpose(x, {1, 0});                                             // 3x2
  Value s = b.slice(t, {0, 0}, {3, 2}, {2, 1});                                 // rows 0, 2
  Value r = b.reduce(s, b.constant(0, ElementType::F32), Reduction::Add, {1});  // [2]
  Value out = b.broadcast_in_dim(r, {2, 2}, {0});
  auto values = run(b, out, {{{1, 2, 3, 4, 5, 6}, {2, 3}}});
  EXPECT_EQ(values, (std::vector<float>{5, 5, 9, 9}));
}

// On XLA:CPU, column reductions read a materialized input (see the setter's comment);
// row reductions and full reductions stay fusible, and the values do not change.
TEST(Builder, ColumnReductionInputsCanBeMaterialized) {
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  for (bool materialize : {false, true}) {
    Builder b;
    b.set_for_xla_cpu(materialize);
    b.set_nan_propagating_min_max(true);  // these run on XLA:CPU
    Value x = b.binary("multiply", b.parameter(f32({2, 3})), b.parameter(f32({2, 3})));
    Value zero = b.constant(0, ElementType::F32);
    Value columns = b.reduce(x, zero, Reduction::Add, {0});  // [3]: keeps the innermost dim
    Value rows = b.reduce(x, zero, Reduction::Add, {1});     // [2]
    Value all = b.reduce(x, zero, Reduction::Add, {0, 1});   // []
    Value out = b.concatenate({columns, rows, b.reshape(all, {1})}, 0);
    EXPECT_EQ(count(b.module_text({out}), "stablehlo.optimization_barrier"), materialize ? 1u : 0u);
    auto values = run(b, out, {{{1, 2, 3, 4, 5, 6}, {2, 3}}, {{1, 1, 1, 2, 2, 2}, {2, 3}}});
    EXPECT_EQ(values, (std::vector<float>{9, 12, 15, 6, 30, 36}));
  }
}

TEST(Builder, GatherAndScatterOneDimensional) {
  Builder b;
  Value x = b.parameter(f32({5}));
  Value idx = b.constant_i64({4, 0, 2});
  Value g = b.gather_1d(x, idx);
  Value s = b.scatter_1d(x, idx, g);  // writes x[4], x[0], x[2] back in place
  Value doubled = b.binary("add", s, s);
  auto values = run(b, doubled, {{{1, 2, 3, 4, 5}, {5}}});
  EXPECT_EQ(values, (std::vector<float>{2, 4, 6, 8, 10}));
}

TEST(Builder, FloatConstantsKeepSpecialValues) {
  Builder b;
  Value x = b.parameter(f32({2}));
  Value inf =
      b.broadcast_to(b.constant(-std::numeric_limits<double>::infinity(), ElementType::F32), {2});
  Value m = b.binary("maximum", x, inf);
  Value half = b.broadcast_to(b.constant(0.1, ElementType::F32), {2});
  Value out = b.binary("add", m, half);
  auto values = run(b, out, {{{1, -2}, {2}}});
  EXPECT_FLOAT_EQ(values[0], 1.1f);
  EXPECT_FLOAT_EQ(values[1], -1.9f);
}

TEST(Builder, PadConcatenateIotaCompareSelect) {
  Builder b;
  Value x = b.parameter(f32({2}));
  Value p = b.pad(x, b.constant(7, ElementType::F32), {1}, {0}, {1});  // [7, x0, 7, x1]
  Value c = b.concatenate({p, x}, 0);                                  // 6 elements
  Value i = b.convert(b.iota(TensorType{ElementType::S32, {6}}, 0), ElementType::F32);
  Value pred = b.compare(Compare::LT, c, i);
  Value out = b.select(pred, c, i);  // min(c, iota)
  auto values = run(b, out, {{{3, 4}, {2}}});
  EXPECT_EQ(values, (std::vector<float>{0, 1, 2, 3, 3, 4}));
}

TEST(Builder, DonatedParameterIsDeclared) {
  Builder b;
  Value x = b.parameter(f32({2}));
  b.alias_parameter(0, 0);
  EXPECT_NE(b.module_text({b.unary("negate", x)}).find("tf.aliasing_output = 0 : i32"),
            std::string::npos);
}

}  // namespace
}  // namespace tpu::hlo

namespace tpu::hlo {
namespace {

TEST(Builder, RegionsAndMultiResultOps) {
  // A variadic reduce with a region: (max value, its index) over a row, as argmax does.
  Builder b;
  Value x = b.parameter(f32({5}));
  Value index = b.iota(TensorType{ElementType::S32, {5}}, 0);
  TensorType f{ElementType::F32, {}};
  TensorType i{ElementType::S32, {}};
  std::string body = b.region({f, i, f, i}, [&](Builder& r, const std::vector<Value>& a) {
    Value take_left = r.compare(Compare::GE, a[0], a[2]);
    return std::vector<Value>{r.select(take_left, a[0], a[2]), r.select(take_left, a[1], a[3])};
  });
  std::vector<Value> result = b.op_multi(
      "reduce", {x, index, b.constant(-1e30, ElementType::F32), b.constant(0, ElementType::S32)},
      {f, i}, "dimensions = array<i64: 0>", body);
  Value as_float = b.convert(result[1], ElementType::F32);
  EXPECT_EQ(run(b, as_float, {{{3, 9, 1, 9, 2}, {5}}}), (std::vector<float>{1}));
}

}  // namespace
}  // namespace tpu::hlo
