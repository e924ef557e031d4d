#include "convolution.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>

#include <atomic>
#include <exception>
#include <optional>
#include <stdexcept>

#include "ffi_call.h"
#include "matmul.h"

namespace tpu::host_kernels {

std::vector<int64_t> ConvolutionSettings::encode() const {
  std::vector<int64_t> out{static_cast<int64_t>(stride.size())};
  for (const auto* v : {&stride, &padding, &dilation, &output_padding}) {
    out.insert(out.end(), v->begin(), v->end());
  }
  out.insert(out.end(), {groups, transposed, grad_input, grad_weight, grad_bias});
  return out;
}

ConvolutionSettings ConvolutionSettings::decode(c10::ArrayRef<int64_t> values) {
  const int64_t count = static_cast<int64_t>(values.size());
  const int64_t d = count > 0 ? values[0] : -1;
  if (d < 1 || d > 3 || count != 1 + 4 * d + 5) {
    throw std::invalid_argument("malformed convolution settings");
  }
  ConvolutionSettings s;
  const int64_t* next = values.data() + 1;
  for (auto* v : {&s.stride, &s.padding, &s.dilation, &s.output_padding}) {
    v->assign(next, next + d);
    next += d;
  }
  s.groups = next[0];
  s.transposed = next[1] != 0;
  s.grad_input = next[2] != 0;
  s.grad_weight = next[3] != 0;
  s.grad_bias = next[4] != 0;
  return s;
}

namespace {

// Multiply-adds of a convolution producing `out` from `weight`: each output element takes
// in_channels / groups x kernel elements (the weight's elements per output channel).
int64_t work(const at::Tensor& out, const at::Tensor& weight, bool transposed) {
  const int64_t per_output_channel = weight.numel() / weight.size(transposed ? 1 : 0);
  return out.numel() * per_output_channel;
}

// (input, weight[, bias], settings) -> out
ffi::Error* forward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  const int64_t operands = frame->args.size;
  if ((operands != 3 && operands != 4) || frame->rets.size != 1) {
    return fail(frame, "torch_tpu host convolution: expected 3 or 4 operands and 1 result");
  }
  try {
    const ConvolutionSettings s =
        ConvolutionSettings::decode(int64s_of(operand(frame, operands - 1)));
    at::Tensor input = as_tensor(operand(frame, 0));
    at::Tensor weight = as_tensor(operand(frame, 1));
    std::optional<at::Tensor> bias;
    if (operands == 4) bias = as_tensor(operand(frame, 2));
    at::Tensor out = as_tensor(result(frame, 0));
    run_kernel(work(out, weight, s.transposed), [&] {
      out.copy_(at::convolution(input, weight, bias, s.stride, s.padding, s.dilation, s.transposed,
                                s.output_padding, s.groups));
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host convolution: ") + e.what());
  }
}

// (grad_out, input, weight, settings) -> the asked-for gradients of input, weight, bias
ffi::Error* backward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  if (frame->args.size != 4) {
    return fail(frame, "torch_tpu host convolution backward: expected 4 operands");
  }
  try {
    const ConvolutionSettings s = ConvolutionSettings::decode(int64s_of(operand(frame, 3)));
    const int64_t asked = s.grad_input + s.grad_weight + s.grad_bias;
    if (frame->rets.size != asked) {
      throw std::invalid_argument("expected a result per gradient asked for");
    }
    at::Tensor grad_out = as_tensor(operand(frame, 0));
    at::Tensor input = as_tensor(operand(frame, 1));
    at::Tensor weight = as_tensor(operand(frame, 2));
    const std::vector<int64_t> bias_sizes{grad_out.size(1)};
    run_kernel(3 * work(grad_out, weight, s.transposed), [&] {
      auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
          grad_out, input, weight,
          s.grad_bias ? c10::OptionalIntArrayRef(bias_sizes) : std::nullopt, s.stride, s.padding,
          s.dilation, s.transposed, s.output_padding, s.groups,
          {s.grad_input, s.grad_weight, s.grad_bias});
      int64_t next = 0;
      if (s.grad_input) as_tensor(result(frame, next++)).copy_(grad_input);
      if (s.grad_weight) as_tensor(result(frame, next++)).copy_(grad_weight);
      if (s.grad_bias) as_tensor(result(frame, next++)).copy_(grad_bias);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host convolution backward: ") + e.what());
  }
}

KernelSet kernels{"convolution"};

}  // namespace

std::string host_convolution_target(bool backward) {
  return backward ? "torch_tpu.host_convolution_backward" : "torch_tpu.host_convolution";
}

bool host_convolution_enabled() { return kernels.enabled(); }

bool install_host_convolution() {
  return kernels.install(
      {{host_convolution_target(false), &forward}, {host_convolution_target(true), &backward}});
}

}  // namespace tpu::host_kernels
