// What the plugin does with StableHLO's bounded dynamism, the mechanism a program for a
// bucket of sizes (issue: bounded dynamic shapes) can rest on: a static buffer padded to
// the bucket's bound, made dynamic with set_dimension_size and the real size as data, then
// reductions and a softmax over the dynamic dimension. XLA's dynamic padder masks the
// padding in reductions, so the padding never reaches a result; padded positions of a
// dynamic result read back as garbage, which the caller slices off.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "pjrt/client.h"
#include "plugin_path.h"

namespace tpu::pjrt {
namespace {

using tpu::testing::shared_client;

// max(x[:n]) and softmax(x[:n]), padded back to 8: x is padded to 8, n is data.
const char* kMaxAndSoftmaxOfAPrefix = R"(
func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> (tensor<f32>, tensor<8xf32>) {
  %d = stablehlo.set_dimension_size %x, %n, dim = 0
      : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
  %low = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %max = stablehlo.reduce(%d init: %low) applies stablehlo.maximum across dimensions = [0]
      : (tensor<?xf32, #stablehlo.bounds<8>>, tensor<f32>) -> tensor<f32>
  %e = stablehlo.exponential %d : tensor<?xf32, #stablehlo.bounds<8>>
  %total = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<?xf32, #stablehlo.bounds<8>>, tensor<f32>) -> tensor<f32>
  %b = stablehlo.broadcast_in_dim %total, dims = []
      : (tensor<f32>) -> tensor<?xf32, #stablehlo.bounds<8>>
  %softmax = stablehlo.divide %e, %b : tensor<?xf32, #stablehlo.bounds<8>>
  %bound = stablehlo.constant dense<8> : tensor<i32>
  %padded = stablehlo.set_dimension_size %softmax, %bound, dim = 0
      : (tensor<?xf32, #stablehlo.bounds<8>>, tensor<i32>) -> tensor<8xf32>
  return %max, %padded : tensor<f32>, tensor<8xf32>
}
)";

TEST(BoundedDynamism, ReductionsOverADynamicDimensionNeverSeeThePadding) {
  auto executable = shared_client().compile(kMaxAndSoftmaxOfAPrefix);
  // The padding is larger than every real value: a reduction that read it would show it.
  std::array<float, 8> x = {1, 2, 3, 100, 100, 100, 100, 100};
  BufferPtr values = shared_client().buffer_from_host(x.data(), PJRT_Buffer_Type_F32, {8}, 0);
  for (int n = 1; n <= 3; ++n) {
    int32_t size = n;
    BufferPtr count = shared_client().buffer_from_host(&size, PJRT_Buffer_Type_S32, {}, 0);
    std::vector<BufferPtr> out =
        executable->execute({values->get(), count->get()}, shared_client().device(0));
    float max = 0;
    std::array<float, 8> softmax{};
    out[0]->to_host(&max, sizeof max);
    out[1]->to_host(softmax.data(), sizeof softmax);
    EXPECT_EQ(max, static_cast<float>(n));
    double total = 0;
    for (int i = 0; i < n; ++i) total += std::exp(static_cast<double>(x[i]));
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(softmax[i], std::exp(static_cast<double>(x[i])) / total, 1e-6) << n << " " << i;
    }
  }
}

// The shape a lowering that knows nothing of dynamism emits: the input is made dynamic
// once, then every type is static (the bucket's bound). XLA's dynamic dimension inference
// still follows the size from the set_dimension_size through the elementwise op and a
// reshape that merges the dynamic dimension, and masks the padding in both reductions.
// A size used as a value must be read from the dynamic-typed value: get_dimension_size of
// a static-typed one folds to the bound before XLA sees it.
const char* kStaticTypesDownstream = R"(
func.func public @main(%x: tensor<2x8xf32>, %n: tensor<i32>)
    -> (tensor<2xf32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  %d = stablehlo.set_dimension_size %x, %n, dim = 1
      : (tensor<2x8xf32>, tensor<i32>) -> tensor<2x?xf32, #stablehlo.bounds<?, 8>>
  %s = stablehlo.convert %d : (tensor<2x?xf32, #stablehlo.bounds<?, 8>>) -> tensor<2x8xf32>
  %low = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %e = stablehlo.exponential %s : tensor<2x8xf32>
  %max = stablehlo.reduce(%e init: %low) applies stablehlo.maximum across dimensions = [1]
      : (tensor<2x8xf32>, tensor<f32>) -> tensor<2xf32>
  %r = stablehlo.reshape %e : (tensor<2x8xf32>) -> tensor<16xf32>
  %total = stablehlo.reduce(%r init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
  %folded = stablehlo.get_dimension_size %e, dim = 1 : (tensor<2x8xf32>) -> tensor<i32>
  %size = stablehlo.get_dimension_size %d, dim = 1
      : (tensor<2x?xf32, #stablehlo.bounds<?, 8>>) -> tensor<i32>
  return %max, %total, %folded, %size : tensor<2xf32>, tensor<f32>, tensor<i32>, tensor<i32>
}
)";

TEST(BoundedDynamism, StaticTypesAfterTheInputStillMaskThePadding) {
  auto executable = shared_client().compile(kStaticTypesDownstream);
  std::array<float, 16> x = {1, 2, 3, 9, 9, 9, 9, 9, 0, 0, 0, 9, 9, 9, 9, 9};
  BufferPtr values = shared_client().buffer_from_host(x.data(), PJRT_Buffer_Type_F32, {2, 8}, 0);
  int32_t n = 3;
  BufferPtr count = shared_client().buffer_from_host(&n, PJRT_Buffer_Type_S32, {}, 0);
  std::vector<BufferPtr> out =
      executable->execute({values->get(), count->get()}, shared_client().device(0));
  std::array<float, 2> max{};
  float total = 0;
  int32_t folded = 0, size = 0;
  out[0]->to_host(max.data(), sizeof max);
  out[1]->to_host(&total, sizeof total);
  out[2]->to_host(&folded, sizeof folded);
  out[3]->to_host(&size, sizeof size);
  EXPECT_FLOAT_EQ(max[0], std::exp(3.0f));
  EXPECT_FLOAT_EQ(max[1], 1.0f);
  EXPECT_NEAR(total, std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + 3.0, 1e-4);
  EXPECT_EQ(folded, 8);
  EXPECT_EQ(size, 3);
}

}  // namespace
}  // namespace tpu::pjrt
