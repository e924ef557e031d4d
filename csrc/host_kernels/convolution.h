#pragma once
// Convolutions on the CPU platform, run by PyTorch's CPU convolution (oneDNN where PyTorch picks
// it) as typed-FFI custom calls, like the host matmul (matmul.h) and under the same switch
// (TORCH_TPU_HOST_MATMUL). XLA:CPU's own convolution took 3-6x PyTorch's time for a small CNN's
// layers (32x3x16x16 by 16x3x3x3: 497 against 83 us).
//
// Forward:  (input, weight[, bias], settings) -> out
// Backward: (grad_out, input, weight, settings) -> the gradients the settings ask for, in the
//           order input, weight, bias
// float32 only; 1-, 2- and 3-d, strided, padded, dilated, grouped and transposed. The settings
// are an int64 vector (ConvolutionSettings below) the program holds as a constant.
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::host_kernels {

// What a convolution call needs besides its tensors, as the settings operand encodes it:
// [d, stride x d, padding x d, dilation x d, output_padding x d, groups, transposed,
//  grad_input, grad_weight, grad_bias] (the last three only read by the backward).
struct ConvolutionSettings {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
  bool grad_input = false, grad_weight = false, grad_bias = false;

  std::vector<int64_t> encode() const;
  static ConvolutionSettings decode(c10::ArrayRef<int64_t> values);
};

// Registers the convolution handlers with the running CPU plugin; returns whether programs may
// call them (false where the host matmul could not be installed either).
bool install_host_convolution();
// Whether programs built from now on call the kernels: installed, and host kernels enabled
// (host_matmul_enabled).
bool host_convolution_enabled();
// The custom-call target of the forward or backward kernel.
std::string host_convolution_target(bool backward);

}  // namespace tpu::host_kernels
