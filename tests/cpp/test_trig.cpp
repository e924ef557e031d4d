#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "hlo/log1p.h"
#include "hlo/trig.h"
#include "plugin_path.h"

namespace tpu::hlo {
namespace {

using tpu::testing::shared_client;

// sin, cos or tan of `inputs` (a 1-D float32 tensor) as lowered for XLA:CPU, and the module's
// text.
std::vector<float> run_trig(const std::vector<float>& inputs, bool cosine, std::string* text,
                            bool tangent = false) {
  Builder b;
  b.set_for_xla_cpu(true);
  b.set_nan_propagating_min_max(true);  // these run on XLA:CPU
  Value x = b.parameter(TensorType{ElementType::F32, {static_cast<int64_t>(inputs.size())}});
  Value y = tangent ? hlo::tangent(b, x) : cosine ? hlo::cosine(b, x) : hlo::sine(b, x);
  *text = b.module_text({y});
  auto executable = shared_client().compile(*text);
  auto argument = shared_client().buffer_from_host(inputs.data(), PJRT_Buffer_Type_F32,
                                                   {static_cast<int64_t>(inputs.size())}, 0);
  auto outputs = executable->execute({argument->get()}, shared_client().device(0));
  std::vector<float> out(inputs.size());
  outputs.at(0)->to_host(out.data(), out.size() * sizeof(float));
  return out;
}

bool has(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

// Within 2 units in the last place of the exact value, or 2^-23 of it where the exact value is
// near a zero (the range reduction's absolute error; PyTorch's float32 tolerance is 1e-5).
void expect_close(float x, float got, double exact) {
  const double ulp =
      std::nextafter(static_cast<float>(std::fabs(exact)), std::numeric_limits<float>::infinity()) -
      static_cast<float>(std::fabs(exact));
  EXPECT_LE(std::fabs(got - exact), std::max(2 * ulp, 0x1p-23)) << "x = " << x;
}

TEST(Trig, PolynomialMatchesLibmOnFloat32Tensors) {
  for (bool cosine : {false, true}) {
    // The whole range up to (not including) the bound, octant boundaries and tiny values.
    const float bound = static_cast<float>(cosine ? kCosineExactBelow : kSineExactBelow);
    std::vector<float> inputs;
    for (int i = 1; i < 20000; ++i) inputs.push_back(-bound + i * (bound / 10000));
    for (int i = -400; i <= 400; ++i) inputs.push_back(i * static_cast<float>(M_PI / 4));
    for (int i = 0; i < 200; ++i) inputs.push_back(std::ldexp(1.0f, -i / 4));
    for (float x : inputs) ASSERT_LT(std::fabs(x), bound) << "every input is in range";
    std::string text;
    std::vector<float> out = run_trig(inputs, cosine, &text);
    EXPECT_TRUE(has(text, "stablehlo.if")) << "a large float32 tensor takes the polynomial";
    for (size_t i = 0; i < inputs.size(); ++i) {
      expect_close(inputs[i], out[i],
                   cosine ? std::cos(double{inputs[i]}) : std::sin(double{inputs[i]}));
    }
  }
}

// tan is the quotient of the two polynomials: within 4 ULP, or 2.5e-7 near its zeros.
TEST(Trig, TangentMatchesLibm) {
  std::vector<float> inputs;
  const float bound = static_cast<float>(kCosineExactBelow);
  for (int i = 1; i < 20000; ++i) inputs.push_back(-bound + i * (bound / 10000));
  for (int i = -400; i <= 400; ++i) inputs.push_back(i * static_cast<float>(M_PI / 4));
  inputs.push_back(-0.0f);
  std::string text;
  std::vector<float> out = run_trig(inputs, false, &text, /*tangent=*/true);
  EXPECT_TRUE(has(text, "stablehlo.if"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double exact = std::tan(double{inputs[i]});
    const double ulp = std::nextafter(static_cast<float>(std::fabs(exact)),
                                      std::numeric_limits<float>::infinity()) -
                       static_cast<float>(std::fabs(exact));
    EXPECT_LE(std::fabs(out[i] - exact), std::max(4 * ulp, 2.5e-7)) << "x = " << inputs[i];
  }
  EXPECT_TRUE(std::signbit(out.back())) << "tan(-0) is -0";
}

TEST(Trig, PolynomialKeepsSignedZerosAndNaN) {
  std::vector<float> special = {0.0f, -0.0f, std::nanf(""), 1e-30f, -1e-30f};
  special.resize(kVectorTrigMinElements, 1.0f);
  std::string text;
  std::vector<float> sin = run_trig(special, false, &text);
  EXPECT_FALSE(std::signbit(sin[0]));
  EXPECT_TRUE(std::signbit(sin[1])) << "sin(-0) is -0";
  EXPECT_TRUE(std::isnan(sin[2]));
  EXPECT_EQ(sin[3], 1e-30f);
  EXPECT_EQ(sin[4], -1e-30f);
  std::vector<float> cos = run_trig(special, true, &text);
  EXPECT_EQ(cos[0], 1.0f);
  EXPECT_EQ(cos[1], 1.0f);
  EXPECT_TRUE(std::isnan(cos[2]));
}

TEST(Trig, InfinitiesAndHugeInputsTakeLibm) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> inputs(kVectorTrigMinElements, 0.5f);
  inputs[3] = inf;
  inputs[4] = -inf;
  inputs[5] = std::nanf("");  // NaN next to a huge value still takes libm for the huge one
  inputs[7] = 1e30f;
  inputs[8] = -123456.789f;
  for (bool cosine : {false, true}) {
    std::string text;
    std::vector<float> out = run_trig(inputs, cosine, &text);
    EXPECT_TRUE(std::isnan(out[3]) && std::isnan(out[4]) && std::isnan(out[5]));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (std::isfinite(inputs[i])) {
        expect_close(inputs[i], out[i],
                     cosine ? std::cos(double{inputs[i]}) : std::sin(double{inputs[i]}));
      }
    }
  }
}

TEST(Trig, SmallTensorsAndOtherTargetsUseStablehloSine) {
  for (bool for_cpu : {false, true}) {
    Builder b;
    b.set_for_xla_cpu(for_cpu);
    b.set_nan_propagating_min_max(true);  // these run on XLA:CPU
    const int64_t n = for_cpu ? kVectorTrigMinElements - 1 : kVectorTrigMinElements;
    Value y = hlo::sine(b, b.parameter(TensorType{ElementType::F32, {n}}));
    std::string text = b.module_text({y});
    EXPECT_TRUE(has(text, "stablehlo.sine"));
    EXPECT_FALSE(has(text, "stablehlo.if"));
  }
}

// atan2 over a grid of (y, x) in every quadrant, with zeros, infinities and NaN: within 3 ULP of
// the exact value, the IEEE results at the special points, and no libm call left.
TEST(Trig, ArcTangent2MatchesLibmWithinThreeUlp) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {0.0f,   -0.0f, 1.0f, -1.0f,        1e-30f,
                                      -1e30f, inf,   -inf, std::nanf("")};
  std::vector<float> ys, xs;
  for (int i = -60; i <= 60; ++i) {
    for (int j = -60; j <= 60; ++j) {
      ys.push_back(std::ldexp(static_cast<float>(i), i % 7));
      xs.push_back(std::ldexp(static_cast<float>(j) + 0.37f, -(j % 5)));
    }
  }
  for (float y : special) {
    for (float x : special) {
      ys.push_back(y);
      xs.push_back(x);
    }
  }
  Builder b;
  b.set_for_xla_cpu(true);
  b.set_nan_propagating_min_max(true);  // these run on XLA:CPU
  const TensorType type{ElementType::F32, {static_cast<int64_t>(ys.size())}};
  Value y = b.parameter(type), x = b.parameter(type);
  std::string text = b.module_text({hlo::arctangent2(b, y, x)});
  EXPECT_FALSE(has(text, "stablehlo.atan2"));
  auto executable = shared_client().compile(text);
  auto y_buffer = shared_client().buffer_from_host(ys.data(), PJRT_Buffer_Type_F32, type.dims, 0);
  auto x_buffer = shared_client().buffer_from_host(xs.data(), PJRT_Buffer_Type_F32, type.dims, 0);
  auto outputs = executable->execute({y_buffer->get(), x_buffer->get()}, shared_client().device(0));
  std::vector<float> out(ys.size());
  outputs.at(0)->to_host(out.data(), out.size() * sizeof(float));
  for (size_t i = 0; i < ys.size(); ++i) {
    const float exact = std::atan2(ys[i], xs[i]);  // libm's float result, IEEE's specials
    if (std::isnan(exact)) {
      EXPECT_TRUE(std::isnan(out[i])) << ys[i] << ", " << xs[i];
      continue;
    }
    const double ulp =
        std::nextafter(std::fabs(exact), inf) - static_cast<double>(std::fabs(exact));
    EXPECT_LE(std::fabs(out[i] - std::atan2(double{ys[i]}, double{xs[i]})), 3 * ulp)
        << "atan2(" << ys[i] << ", " << xs[i] << ")";
    EXPECT_EQ(std::signbit(out[i]), std::signbit(exact)) << ys[i] << ", " << xs[i];
  }
}

// log1p by log(1 + x) * x / ((1 + x) - 1): within 3 ULP of libm's log1p where 1 + x rounds
// (tiny x) and elsewhere, with -1, -inf, +inf, NaN and signed zeros as IEEE says.
TEST(Log1p, FormulaMatchesLibmWithinThreeUlp) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> inputs = {0.0f, -0.0f, -1.0f, -1.5f, inf, -inf, std::nanf(""), 3e38f};
  for (int i = -300; i <= 300; ++i) {
    const float magnitude = std::ldexp(1.0f + 0.013f * (i % 7), i / 3);  // 2^-100 .. 2^100
    inputs.push_back(magnitude);
    if (magnitude < 1.0f) inputs.push_back(-magnitude);
  }
  for (int i = 1; i < 1000; ++i) inputs.push_back(-1.0f + i * 0.002f);
  Builder b;
  b.set_for_xla_cpu(true);
  b.set_nan_propagating_min_max(true);  // these run on XLA:CPU
  const TensorType type{ElementType::F32, {static_cast<int64_t>(inputs.size())}};
  std::string text = b.module_text({hlo::log_plus_one(b, b.parameter(type))});
  EXPECT_FALSE(has(text, "stablehlo.log_plus_one"));
  auto executable = shared_client().compile(text);
  auto argument =
      shared_client().buffer_from_host(inputs.data(), PJRT_Buffer_Type_F32, type.dims, 0);
  auto outputs = executable->execute({argument->get()}, shared_client().device(0));
  std::vector<float> out(inputs.size());
  outputs.at(0)->to_host(out.data(), out.size() * sizeof(float));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float expected = std::log1p(inputs[i]);
    if (std::isnan(expected) || std::isinf(expected) || expected == 0) {
      EXPECT_TRUE(std::isnan(expected) ? std::isnan(out[i]) : out[i] == expected)
          << "log1p(" << inputs[i] << ") = " << out[i];
      if (!std::isnan(expected)) EXPECT_EQ(std::signbit(out[i]), std::signbit(expected));
      continue;
    }
    const double ulp =
        std::nextafter(std::fabs(expected), inf) - static_cast<double>(std::fabs(expected));
    EXPECT_LE(std::fabs(out[i] - std::log1p(double{inputs[i]})), 3 * ulp)
        << "log1p(" << inputs[i] << ")";
  }
}

}  // namespace
}  // namespace tpu::hlo
