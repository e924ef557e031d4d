#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "plugin_path.h"
#include "runtime/strided.h"

namespace tpu::runtime {
namespace {

using hlo::ElementType;
using hlo::TensorType;
using tpu::testing::shared_client;

constexpr int64_t kStorage = 24;

std::vector<float> storage_values() {
  std::vector<float> v(kStorage);
  for (int64_t i = 0; i < kStorage; ++i) v[i] = static_cast<float>(i * 10 + 1);
  return v;
}

// Flat storage indices of the view's elements in row-major order: the reference.
std::vector<int64_t> reference_indices(const StridedView& view) {
  std::vector<int64_t> out;
  std::vector<int64_t> index(view.sizes.size(), 0);
  for (int64_t n = 0; n < view.numel(); ++n) {
    int64_t flat = view.offset;
    for (size_t d = 0; d < index.size(); ++d) flat += index[d] * view.strides[d];
    out.push_back(flat);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < view.sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

std::vector<float> run(const hlo::Builder& b, const hlo::Value& result,
                       const std::vector<float>& input) {
  auto executable = shared_client().compile(b.module_text({result}));
  auto buffer = shared_client().buffer_from_host(input.data(), PJRT_Buffer_Type_F32,
                                                 {static_cast<int64_t>(input.size())}, 0);
  auto outputs = executable->execute({buffer->get()}, shared_client().device(0));
  std::vector<float> out(result.type.num_elements());
  outputs[0]->to_host(out.data(), out.size() * sizeof(float));
  return out;
}

// (sizes, strides, offset) over 24 elements: contiguous, transposed, sliced with steps,
// a diagonal, a broadcast, an overlapping window (unfold), a single element.
const std::vector<StridedView> kViews = {
    {{4, 6}, {6, 1}, 0},        {{6, 4}, {1, 6}, 0},  {{2, 3}, {6, 1}, 7},
    {{2, 3}, {12, 2}, 1},       {{4}, {7, 0}, 0},     {{3}, {7}, 2},
    {{4, 3}, {6, 0}, 0},        {{5, 4}, {2, 1}, 0},  {{1, 3, 1}, {99, 5, 77}, 3},
    {{2, 2, 3}, {1, 12, 4}, 0}, {{3, 2}, {1, 3}, 17}, {{}, {}, 23},
    {{2, 0}, {1, 1}, 0},
};

TEST(Strided, ReadMatchesReferenceIndexing) {
  std::vector<float> values = storage_values();
  for (const StridedView& view : kViews) {
    hlo::Builder b;
    hlo::Value storage = b.parameter(TensorType{ElementType::F32, {kStorage}});
    hlo::Value result = read_strided(b, storage, view);
    ASSERT_EQ(result.dims(), view.sizes);
    std::vector<float> expected;
    for (int64_t i : reference_indices(view)) expected.push_back(values[i]);
    EXPECT_EQ(run(b, result, values), expected) << "offset " << view.offset;
  }
}

// Views at a constant offset inside the box their strides make (a column block of rows,
// q/k/v out of one projection) read the storage from a row on, with no padding; the last one
// reaches past the storage's end from its first row and takes the padded range.
TEST(Strided, ConstantOffsetsInsideTheBoxReadWithoutPadding) {
  std::vector<float> values = storage_values();
  const std::vector<std::pair<StridedView, bool>> cases = {
      {{{4, 2}, {6, 1}, 3}, false},  {{{2, 2, 2}, {12, 3, 1}, 4}, false},
      {{{3, 2}, {1, 6}, 8}, false},  {{{6}, {4}, 3}, false},
      {{{2, 2}, {10, 1}, 12}, true},
  };
  for (const auto& [view, padded] : cases) {
    hlo::Builder b;
    hlo::Value storage = b.parameter(TensorType{ElementType::F32, {kStorage}});
    hlo::Value result = read_strided(b, storage, view);
    std::vector<float> expected;
    for (int64_t i : reference_indices(view)) expected.push_back(values[i]);
    EXPECT_EQ(run(b, result, values), expected) << "offset " << view.offset;
    const bool pads = b.module_text({result}).find("stablehlo.pad") != std::string::npos;
    EXPECT_EQ(pads, padded) << "offset " << view.offset;
  }
}

TEST(Strided, WriteMatchesReferenceScatter) {
  std::vector<float> values = storage_values();
  for (const StridedView& view : kViews) {
    bool broadcast = false;
    for (size_t d = 0; d < view.sizes.size(); ++d) {
      broadcast = broadcast || (view.sizes[d] > 1 && view.strides[d] == 0);
    }
    if (broadcast) continue;  // PyTorch refuses writes through overlapping views
    std::vector<int64_t> indices = reference_indices(view);
    std::vector<int64_t> sorted = indices;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) continue;

    hlo::Builder b;
    hlo::Value storage = b.parameter(TensorType{ElementType::F32, {kStorage}});
    hlo::Value negated = b.unary("negate", read_strided(b, storage, view));
    hlo::Value result = write_strided(b, storage, view, negated);
    std::vector<float> expected = values;
    for (int64_t i : indices) expected[i] = -values[i];
    EXPECT_EQ(run(b, result, values), expected) << "offset " << view.offset;
  }
}

TEST(Strided, CoversExactly) {
  EXPECT_TRUE((StridedView{{4, 6}, {6, 1}, 0}).covers_exactly(24));
  EXPECT_TRUE((StridedView{{6, 4}, {1, 6}, 0}).covers_exactly(24));
  EXPECT_FALSE((StridedView{{6, 4}, {1, 6}, 0}).covers_exactly(25));
  EXPECT_FALSE((StridedView{{2, 3}, {6, 1}, 7}).covers_exactly(24));
}

TEST(Strided, ReinterpretBytes) {
  hlo::Builder b;
  hlo::Value storage = b.parameter(TensorType{ElementType::F32, {2}});
  hlo::Value halves = reinterpret(b, storage, ElementType::S16);
  EXPECT_EQ(halves.dims(), (std::vector<int64_t>{4}));
  hlo::Value back = reinterpret(b, halves, ElementType::F32);
  EXPECT_EQ(run(b, back, {1.5f, -2.0f}), (std::vector<float>{1.5f, -2.0f}));
  hlo::Builder odd;
  hlo::Value three = odd.parameter(TensorType{ElementType::S16, {3}});
  EXPECT_THROW(reinterpret(odd, three, ElementType::F32), std::invalid_argument);
}

}  // namespace
}  // namespace tpu::runtime
