// Quantized tensors on tpu (torch.quantize_per_tensor(x_tpu, ...), torch._empty_affine_quantized
// with device="tpu"): a quantized tpu tensor is PyTorch's own QTensorImpl over a tpu storage of
// its integer representation (uint8 for quint8, int8 for qint8, int32 for qint32), as on CUDA.
// What a quantized tensor is made of (its constructors, quantizer accessors, views and copies)
// are ATen's device-generic kernels, registered here for QuantizedPrivateUse1 as ATen registers
// them for QuantizedCPU and QuantizedCUDA; a copy moves the integer data. Quantized arithmetic
// (quantize_per_tensor, dequantize, int_repr, flip, ...) runs on the CPU through the fallback,
// counted and warned about as any other fallback: enough for code that keeps quantized tensors
// on the device and reads them back, not a quantized inference path.
#include <ATen/ATen.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/Quantizer.h>
#include <torch/library.h>

#include "aten/fallback.h"

namespace tpu::aten {

namespace {

// The integer data of quantized tensor `q` (on either device) as a plain tensor over the same
// storage, with the same sizes and strides.
at::Tensor integer_view(const at::Tensor& q) {
  TORCH_CHECK(q.scalar_type() != c10::kQUInt4x2 && q.scalar_type() != c10::kQUInt2x4,
              "quantized tpu tensors of the packed type ", q.scalar_type(),
              " are not supported; use quint8, qint8 or qint32");
  at::Tensor raw = at::empty({0}, q.options().dtype(c10::toUnderlying(q.scalar_type())));
  return raw.set_(q.storage(), q.storage_offset(), q.sizes(), q.strides());
}

// _copy_from(src, dst): ATen's copy_ hands a copy that involves a tpu tensor to this before
// it looks at quantizers, so the rules of the CPU's quantized copy_ are applied here: between
// quantized tensors of one qscheme and dtype, dst takes src's quantizer and its integers; a
// float source is quantized with dst's quantizer (on the CPU); a quantized source never goes
// into a float tensor.
at::Tensor copy_from_quantized(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(dst.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use "
              "dequantize to get a float Tensor from a quantized Tensor");
  at::Tensor quantized = src;
  if (!src.is_quantized()) {
    quantized = dst.cpu();
    quantized.copy_(src.cpu());
  }
  TORCH_CHECK(dst.qscheme() == quantized.qscheme(), "Quantized Copy only works with same qscheme");
  TORCH_CHECK(dst.scalar_type() == quantized.scalar_type(), "Quantized Copy only works with ",
              dst.scalar_type(), ", got ", quantized.scalar_type());
  TORCH_CHECK(dst.sizes().equals(quantized.sizes()), "quantized copy_ between tensors of sizes ",
              quantized.sizes(), " and ", dst.sizes(), ": broadcasting is not supported on tpu");
  at::set_quantizer_(dst, quantized.quantizer());
  at::Tensor out = integer_view(dst);
  out.copy_(integer_view(quantized), non_blocking);
  return dst;
}

// The CPU fallback writes a mutated quantized argument back with this (same sizes: the
// quantized kernels the fallback runs do not resize their arguments).
at::Tensor copy_from_and_resize_quantized(const at::Tensor& src, const at::Tensor& dst) {
  return copy_from_quantized(src, dst, false);
}

// ATen's _to_copy makes its copy of a quantized tensor that is not dense (a slice, a
// transpose) with empty_like, on the tensor's own device whatever `device` asks for: such a
// tensor's .cpu() stayed a tpu tensor, and the CPU fallback handed it to a CPU kernel, which
// crashed. A dense copy goes where it is asked to.
at::Tensor to_copy_quantized(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                             std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                             std::optional<bool> pin_memory, bool non_blocking,
                             std::optional<c10::MemoryFormat> memory_format) {
  const at::Tensor& dense = self.is_non_overlapping_and_dense() ? self : self.contiguous();
  return at::native::_to_copy(dense, dtype, layout, device, pin_memory, non_blocking,
                              memory_format);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", TORCH_FN(at::native::empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized",
         TORCH_FN(at::native::empty_per_channel_affine_quantized));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_unknown_quantized));
  m.impl("empty_strided", TORCH_FN(at::native::empty_strided_unknown_quantized));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("squeeze", static_cast<at::Tensor (*)(const at::Tensor&)>(at::native::squeeze_quantized));
  m.impl("squeeze.dim",
         static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(at::native::squeeze_quantized));
  m.impl("squeeze.dims", static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(
                             at::native::squeeze_quantized));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_quantized));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(at::native::set_storage_quantized_));
  m.impl("clone", TORCH_FN(at::native::quantized_clone));
  m.impl("copy_", TORCH_FN(at::native::copy_));
  m.impl("_copy_from", TORCH_FN(copy_from_quantized));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_quantized));
  m.impl("_to_copy", TORCH_FN(to_copy_quantized));
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_quantized_cpu_fallback>());
}

}  // namespace tpu::aten
