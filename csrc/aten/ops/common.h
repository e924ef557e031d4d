#pragma once
// What every lowering file's header shares: the ATen types, the StableHLO builder's names
// declared ahead, the opmath type and the argument aliases of many kernels.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <optional>
#include <tuple>

namespace tpu::hlo {
class Builder;
struct Value;
}  // namespace tpu::hlo

namespace tpu::aten {

// The type PyTorch's CPU kernels compute a dtype's elementwise math in: float32 for
// float16 and bfloat16 (rounded once at the end), the dtype itself otherwise.
inline c10::ScalarType opmath_type(c10::ScalarType type) {
  return type == c10::kHalf || type == c10::kBFloat16 ? c10::kFloat : type;
}

using OptionalDtype = std::optional<c10::ScalarType>;
using OptionalScalar = std::optional<c10::Scalar>;
using TensorPair = std::tuple<at::Tensor, at::Tensor>;
using TensorRefPair = std::tuple<at::Tensor&, at::Tensor&>;

}  // namespace tpu::aten
