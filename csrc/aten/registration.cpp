// The tpu ATen surface in one place: which schema runs which kernel. Everything
// not listed here runs on the CPU through the fallback (fallback.cpp).
#include <torch/library.h>

#include "aten/ops/all.h"

namespace tpu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // factories.cpp
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar_));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor_));
  m.impl("zero_", TORCH_FN(zero_));
  // guard.cpp
  m.impl("record_stream", TORCH_FN(record_stream));
  // assert_async.cpp, polar.cpp
  m.impl("_assert_async", TORCH_FN(assert_async));
  m.impl("_assert_async.msg", TORCH_FN(assert_async_msg));
  m.impl("polar.out", TORCH_FN(polar_out));
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));

  // copy.cpp
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));

  // views.cpp
  m.impl("view", TORCH_FN(view));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("view_as_real", TORCH_FN(view_as_real));
  m.impl("view_as_complex", TORCH_FN(view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage_));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor_));
  m.impl("set_", TORCH_FN(set_empty_));

  // elementwise.cpp
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("add_.Tensor", TORCH_FN(add_));
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("add.Scalar", TORCH_FN(add_scalar));
  m.impl("add_.Scalar", TORCH_FN(add_scalar_));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("sub_.Tensor", TORCH_FN(sub_));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("sub.Scalar", TORCH_FN(sub_scalar));
  m.impl("sub_.Scalar", TORCH_FN(sub_scalar_));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("mul_.Tensor", TORCH_FN(mul_));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("mul.Scalar", TORCH_FN(mul_scalar));
  m.impl("mul_.Scalar", TORCH_FN(mul_scalar_));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("div_.Tensor", TORCH_FN(div_));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("div.Scalar", TORCH_FN(div_scalar));
  m.impl("div_.Scalar", TORCH_FN(div_scalar_));
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_));
  m.impl("threshold_backward", TORCH_FN(threshold_backward));

  // unary.cpp: name, name_ and name.out for every op in TPU_UNARY_OPS
#define TPU_REGISTER_UNARY(name, float_op)                                          \
  m.impl(#name, [](const at::Tensor& self) {                                        \
    return unary_functional("aten::" #name, &unary::name, float_op, self);          \
  });                                                                               \
  m.impl(#name "_", [](at::Tensor& self) -> at::Tensor& {                           \
    return unary_in_place("aten::" #name "_", &unary::name, float_op, self);        \
  });                                                                               \
  m.impl(#name ".out", [](const at::Tensor& self, at::Tensor& out) -> at::Tensor& { \
    return unary_out("aten::" #name ".out", &unary::name, float_op, self, out);     \
  });
  TPU_UNARY_OPS(TPU_REGISTER_UNARY)
#undef TPU_REGISTER_UNARY

  // binary.cpp
#define TPU_TENSOR(t) BinaryOperand{&t, nullptr}
#define TPU_SCALAR(s) \
  BinaryOperand { nullptr, &s }
#define TPU_REGISTER_BINARY_T(name, kind)                                                       \
  m.impl(#name, [](const at::Tensor& self, const at::Tensor& other) {                           \
    return binary_functional("aten::" #name, &binary::name, BinaryKind::kind, TPU_TENSOR(self), \
                             TPU_TENSOR(other));                                                \
  });                                                                                           \
  m.impl(#name ".out",                                                                          \
         [](const at::Tensor& self, const at::Tensor& other, at::Tensor& out) -> at::Tensor& {  \
           return binary_out("aten::" #name ".out", &binary::name, BinaryKind::kind,            \
                             TPU_TENSOR(self), TPU_TENSOR(other), out);                         \
         });                                                                                    \
  m.impl(#name "_", [](at::Tensor& self, const at::Tensor& other) -> at::Tensor& {              \
    return binary_in_place("aten::" #name "_", &binary::name, BinaryKind::kind, self,           \
                           TPU_TENSOR(other));                                                  \
  });
#define TPU_REGISTER_BINARY_TO(name, kind)                                                      \
  m.impl(#name, [](const at::Tensor& self, const at::Tensor& other) {                           \
    return binary_functional("aten::" #name, &binary::name, BinaryKind::kind, TPU_TENSOR(self), \
                             TPU_TENSOR(other));                                                \
  });                                                                                           \
  m.impl(#name ".out",                                                                          \
         [](const at::Tensor& self, const at::Tensor& other, at::Tensor& out) -> at::Tensor& {  \
           return binary_out("aten::" #name ".out", &binary::name, BinaryKind::kind,            \
                             TPU_TENSOR(self), TPU_TENSOR(other), out);                         \
         });
#define TPU_REGISTER_BINARY_none(name, kind)  // registered one by one below
#define TPU_REGISTER_BINARY_TS(name, kind)                                                      \
  m.impl(#name ".Tensor", [](const at::Tensor& self, const at::Tensor& other) {                 \
    return binary_functional("aten::" #name ".Tensor", &binary::name, BinaryKind::kind,         \
                             TPU_TENSOR(self), TPU_TENSOR(other));                              \
  });                                                                                           \
  m.impl(#name ".Scalar", [](const at::Tensor& self, const c10::Scalar& other) {                \
    return binary_functional("aten::" #name ".Scalar", &binary::name, BinaryKind::kind,         \
                             TPU_TENSOR(self), TPU_SCALAR(other));                              \
  });                                                                                           \
  m.impl(#name ".Tensor_out",                                                                   \
         [](const at::Tensor& self, const at::Tensor& other, at::Tensor& out) -> at::Tensor& {  \
           return binary_out("aten::" #name ".Tensor_out", &binary::name, BinaryKind::kind,     \
                             TPU_TENSOR(self), TPU_TENSOR(other), out);                         \
         });                                                                                    \
  m.impl(#name ".Scalar_out",                                                                   \
         [](const at::Tensor& self, const c10::Scalar& other, at::Tensor& out) -> at::Tensor& { \
           return binary_out("aten::" #name ".Scalar_out", &binary::name, BinaryKind::kind,     \
                             TPU_TENSOR(self), TPU_SCALAR(other), out);                         \
         });                                                                                    \
  m.impl(#name "_.Tensor", [](at::Tensor& self, const at::Tensor& other) -> at::Tensor& {       \
    return binary_in_place("aten::" #name "_.Tensor", &binary::name, BinaryKind::kind, self,    \
                           TPU_TENSOR(other));                                                  \
  });                                                                                           \
  m.impl(#name "_.Scalar", [](at::Tensor& self, const c10::Scalar& other) -> at::Tensor& {      \
    return binary_in_place("aten::" #name "_.Scalar", &binary::name, BinaryKind::kind, self,    \
                           TPU_SCALAR(other));                                                  \
  });
#define TPU_REGISTER_BINARY(name, kind, overloads) TPU_REGISTER_BINARY_##overloads(name, kind)
  TPU_BINARY_OPS(TPU_REGISTER_BINARY)
  // special_xlog1py's overloads: a Scalar on either side, each with its out= form.
  m.impl("special_xlog1py", [](const at::Tensor& self, const at::Tensor& other) {
    return binary_functional("aten::special_xlog1py", &binary::xlog1py, BinaryKind::Float,
                             TPU_TENSOR(self), TPU_TENSOR(other));
  });
  m.impl("special_xlog1py.self_scalar", [](const c10::Scalar& self, const at::Tensor& other) {
    return binary_functional("aten::special_xlog1py.self_scalar", &binary::xlog1py,
                             BinaryKind::Float, TPU_SCALAR(self), TPU_TENSOR(other));
  });
  m.impl("special_xlog1py.other_scalar", [](const at::Tensor& self, const c10::Scalar& other) {
    return binary_functional("aten::special_xlog1py.other_scalar", &binary::xlog1py,
                             BinaryKind::Float, TPU_TENSOR(self), TPU_SCALAR(other));
  });
  m.impl("special_xlog1py.out",
         [](const at::Tensor& self, const at::Tensor& other, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::special_xlog1py.out", &binary::xlog1py, BinaryKind::Float,
                             TPU_TENSOR(self), TPU_TENSOR(other), out);
         });
  m.impl("special_xlog1py.self_scalar_out",
         [](const c10::Scalar& self, const at::Tensor& other, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::special_xlog1py.self_scalar_out", &binary::xlog1py,
                             BinaryKind::Float, TPU_SCALAR(self), TPU_TENSOR(other), out);
         });
  m.impl("special_xlog1py.other_scalar_out",
         [](const at::Tensor& self, const c10::Scalar& other, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::special_xlog1py.other_scalar_out", &binary::xlog1py,
                             BinaryKind::Float, TPU_TENSOR(self), TPU_SCALAR(other), out);
         });
  // copysign's overloads: .Tensor and .Scalar, but .out (not .Tensor_out) and .Scalar_out.
  m.impl("copysign.Tensor", [](const at::Tensor& self, const at::Tensor& other) {
    return binary_functional("aten::copysign.Tensor", &binary::copysign, BinaryKind::Float,
                             TPU_TENSOR(self), TPU_TENSOR(other));
  });
  m.impl("copysign.Scalar", [](const at::Tensor& self, const c10::Scalar& other) {
    return binary_functional("aten::copysign.Scalar", &binary::copysign, BinaryKind::Float,
                             TPU_TENSOR(self), TPU_SCALAR(other));
  });
  m.impl("copysign.out",
         [](const at::Tensor& self, const at::Tensor& other, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::copysign.out", &binary::copysign, BinaryKind::Float,
                             TPU_TENSOR(self), TPU_TENSOR(other), out);
         });
  m.impl("copysign.Scalar_out",
         [](const at::Tensor& self, const c10::Scalar& other, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::copysign.Scalar_out", &binary::copysign, BinaryKind::Float,
                             TPU_TENSOR(self), TPU_SCALAR(other), out);
         });
  m.impl("copysign_.Tensor", [](at::Tensor& self, const at::Tensor& other) -> at::Tensor& {
    return binary_in_place("aten::copysign_.Tensor", &binary::copysign, BinaryKind::Float, self,
                           TPU_TENSOR(other));
  });
  m.impl("copysign_.Scalar", [](at::Tensor& self, const c10::Scalar& other) -> at::Tensor& {
    return binary_in_place("aten::copysign_.Scalar", &binary::copysign, BinaryKind::Float, self,
                           TPU_SCALAR(other));
  });
  m.impl("pow.Tensor_Tensor", [](const at::Tensor& self, const at::Tensor& exponent) {
    return binary_functional("aten::pow.Tensor_Tensor", &binary::pow, BinaryKind::Numeric,
                             TPU_TENSOR(self), TPU_TENSOR(exponent));
  });
  m.impl("pow.Tensor_Scalar", [](const at::Tensor& self, const c10::Scalar& exponent) {
    return binary_functional("aten::pow.Tensor_Scalar", &binary::pow, BinaryKind::Numeric,
                             TPU_TENSOR(self), TPU_SCALAR(exponent));
  });
  m.impl("pow.Scalar", [](const c10::Scalar& self, const at::Tensor& exponent) {
    return binary_functional("aten::pow.Scalar", &binary::pow, BinaryKind::Numeric,
                             TPU_SCALAR(self), TPU_TENSOR(exponent));
  });
  m.impl("pow.Tensor_Tensor_out",
         [](const at::Tensor& self, const at::Tensor& exponent, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::pow.Tensor_Tensor_out", &binary::pow, BinaryKind::Numeric,
                             TPU_TENSOR(self), TPU_TENSOR(exponent), out);
         });
  m.impl("pow.Tensor_Scalar_out",
         [](const at::Tensor& self, const c10::Scalar& exponent, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::pow.Tensor_Scalar_out", &binary::pow, BinaryKind::Numeric,
                             TPU_TENSOR(self), TPU_SCALAR(exponent), out);
         });
  m.impl("pow.Scalar_out",
         [](const c10::Scalar& self, const at::Tensor& exponent, at::Tensor& out) -> at::Tensor& {
           return binary_out("aten::pow.Scalar_out", &binary::pow, BinaryKind::Numeric,
                             TPU_SCALAR(self), TPU_TENSOR(exponent), out);
         });
  m.impl("pow_.Tensor", [](at::Tensor& self, const at::Tensor& exponent) -> at::Tensor& {
    return binary_in_place("aten::pow_.Tensor", &binary::pow, BinaryKind::Numeric, self,
                           TPU_TENSOR(exponent));
  });
  m.impl("pow_.Scalar", [](at::Tensor& self, const c10::Scalar& exponent) -> at::Tensor& {
    return binary_in_place("aten::pow_.Scalar", &binary::pow, BinaryKind::Numeric, self,
                           TPU_SCALAR(exponent));
  });
  // div.Scalar_mode and floor_divide.Scalar* are composite over these
  m.impl("div.Tensor_mode", TORCH_FN(div_mode));
  m.impl("div_.Tensor_mode", TORCH_FN(div_mode_));
  m.impl("div.out_mode", TORCH_FN(div_mode_out));
  m.impl("floor_divide", TORCH_FN(floor_divide));
  m.impl("floor_divide.out", TORCH_FN(floor_divide_out));
  m.impl("floor_divide_.Tensor", TORCH_FN(floor_divide_));
#undef TPU_REGISTER_BINARY
#undef TPU_REGISTER_BINARY_TS
#undef TPU_REGISTER_BINARY_T
#undef TPU_SCALAR
#undef TPU_TENSOR

  // random.cpp
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("random_.from", TORCH_FN(random_from_));
  m.impl("random_.to", TORCH_FN(random_to_));
  m.impl("random_", TORCH_FN(random_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float_));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor_));
  m.impl("bernoulli", TORCH_FN(bernoulli));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));

  // unary.cpp, bool-valued and integer-only
  m.impl("signbit", TORCH_FN(signbit));
  m.impl("signbit.out", TORCH_FN(signbit_out));
  m.impl("frac", TORCH_FN(frac));
  m.impl("frac_", TORCH_FN(frac_));
  m.impl("frac.out", TORCH_FN(frac_out));
  m.impl("logit", TORCH_FN(logit));
  m.impl("logit_", TORCH_FN(logit_));
  m.impl("logit.out", TORCH_FN(logit_out));
  m.impl("heaviside", TORCH_FN(heaviside));
  m.impl("heaviside_", TORCH_FN(heaviside_));
  m.impl("heaviside.out", TORCH_FN(heaviside_out));
  m.impl("isneginf", TORCH_FN(isneginf));
  m.impl("isneginf.out", TORCH_FN(isneginf_out));
  m.impl("isposinf", TORCH_FN(isposinf));
  m.impl("isposinf.out", TORCH_FN(isposinf_out));
  m.impl("logical_not", TORCH_FN(logical_not));
  m.impl("logical_not_", TORCH_FN(logical_not_));
  m.impl("logical_not.out", TORCH_FN(logical_not_out));
  m.impl("bitwise_not", TORCH_FN(bitwise_not));
  m.impl("bitwise_not_", TORCH_FN(bitwise_not_));
  m.impl("bitwise_not.out", TORCH_FN(bitwise_not_out));

  // ======== reductions and sorting: reduce.cpp, sort.cpp ========
  // reduce.cpp
  m.impl("sum", TORCH_FN(sum));
  m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("mean", TORCH_FN(mean));
  m.impl("mean.dim", TORCH_FN(mean_dim));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("mean.dtype_out", TORCH_FN(mean_dtype_out));
  m.impl("prod", TORCH_FN(prod));
  m.impl("prod.dim_int", TORCH_FN(prod_dim));
  m.impl("prod.int_out", TORCH_FN(prod_out));
  m.impl("amax", TORCH_FN(amax));
  m.impl("amax.out", TORCH_FN(amax_out));
  m.impl("amin", TORCH_FN(amin));
  m.impl("amin.out", TORCH_FN(amin_out));
  m.impl("max", TORCH_FN(max));
  m.impl("max.unary_out", TORCH_FN(max_unary_out));
  m.impl("max.dim", TORCH_FN(max_dim));
  m.impl("max.dim_max", TORCH_FN(max_dim_out));
  m.impl("min", TORCH_FN(min));
  m.impl("min.unary_out", TORCH_FN(min_unary_out));
  m.impl("min.dim", TORCH_FN(min_dim));
  m.impl("min.dim_min", TORCH_FN(min_dim_out));
  m.impl("argmax", TORCH_FN(argmax));
  m.impl("argmax.out", TORCH_FN(argmax_out));
  m.impl("argmin", TORCH_FN(argmin));
  m.impl("argmin.out", TORCH_FN(argmin_out));
  m.impl("any", TORCH_FN(any));
  m.impl("any.dim", TORCH_FN(any_dim));
  m.impl("any.dims", TORCH_FN(any_dims));
  m.impl("any.out", TORCH_FN(any_out));
  m.impl("any.dims_out", TORCH_FN(any_dims_out));
  m.impl("any.all_out", TORCH_FN(any_all_out));
  m.impl("all", TORCH_FN(all));
  m.impl("all.dim", TORCH_FN(all_dim));
  m.impl("all.dims", TORCH_FN(all_dims));
  m.impl("all.out", TORCH_FN(all_out));
  m.impl("all.dims_out", TORCH_FN(all_dims_out));
  m.impl("all.all_out", TORCH_FN(all_all_out));
  m.impl("var.correction", TORCH_FN(var_correction));
  m.impl("var.correction_out", TORCH_FN(var_correction_out));
  m.impl("std.correction", TORCH_FN(std_correction));
  m.impl("std.correction_out", TORCH_FN(std_correction_out));
  m.impl("var_mean.correction", TORCH_FN(var_mean_correction));
  m.impl("std_mean.correction", TORCH_FN(std_mean_correction));
  m.impl("linalg_vector_norm", TORCH_FN(linalg_vector_norm));
  m.impl("linalg_vector_norm.out", TORCH_FN(linalg_vector_norm_out));
  m.impl("norm.ScalarOpt_dim", TORCH_FN(norm_dim));
  m.impl("norm.ScalarOpt_dim_dtype", TORCH_FN(norm_dim_dtype));
  m.impl("norm.out", TORCH_FN(norm_out));
  m.impl("norm.dtype_out", TORCH_FN(norm_dtype_out));
  m.impl("logsumexp", TORCH_FN(logsumexp));
  m.impl("logsumexp.out", TORCH_FN(logsumexp_out));

  // sort.cpp (argsort is composite over sort.stable)
  m.impl("sort", TORCH_FN(sort));
  m.impl("sort.stable", TORCH_FN(sort_stable));
  m.impl("sort.values", TORCH_FN(sort_values));
  m.impl("sort.values_stable", TORCH_FN(sort_values_stable));
  m.impl("topk", TORCH_FN(topk));
  m.impl("topk.values", TORCH_FN(topk_values));
  m.impl("cumsum", TORCH_FN(cumsum));
  m.impl("cumsum.out", TORCH_FN(cumsum_out));
  m.impl("cumsum_", TORCH_FN(cumsum_));
  m.impl("cumprod", TORCH_FN(cumprod));
  m.impl("cumprod.out", TORCH_FN(cumprod_out));
  m.impl("cumprod_", TORCH_FN(cumprod_));
  m.impl("isin.Tensor_Tensor", TORCH_FN(isin_tensor_tensor));
  m.impl("isin.Tensor_Tensor_out", TORCH_FN(isin_tensor_tensor_out));
  m.impl("isin.Tensor_Scalar", TORCH_FN(isin_tensor_scalar));
  m.impl("isin.Tensor_Scalar_out", TORCH_FN(isin_tensor_scalar_out));
  m.impl("isin.Scalar_Tensor", TORCH_FN(isin_scalar_tensor));
  m.impl("isin.Scalar_Tensor_out", TORCH_FN(isin_scalar_tensor_out));

  // ======== end of reductions and sorting ========

  // matmul.cpp
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("addmm_", TORCH_FN(addmm_));
  m.impl("addmv", TORCH_FN(addmv));
  m.impl("addmv.out", TORCH_FN(addmv_out));
  m.impl("addmv_", TORCH_FN(addmv_));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("baddbmm", TORCH_FN(baddbmm));
  m.impl("baddbmm.out", TORCH_FN(baddbmm_out));
  m.impl("baddbmm_", TORCH_FN(baddbmm_));

  // conv.cpp
  m.impl("convolution_overrideable", TORCH_FN(convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward));

  // pool.cpp
  m.impl("max_pool2d_with_indices", TORCH_FN(max_pool2d_with_indices));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(max_pool2d_with_indices_backward));
  m.impl("avg_pool2d", TORCH_FN(avg_pool2d));
  m.impl("avg_pool2d_backward", TORCH_FN(avg_pool2d_backward));

  // resample.cpp
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool2d));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool2d_backward));
  m.impl("upsample_nearest2d", TORCH_FN(upsample_nearest2d));
  m.impl("upsample_nearest2d_backward", TORCH_FN(upsample_nearest2d_backward));
  m.impl("upsample_bilinear2d", TORCH_FN(upsample_bilinear2d));
  m.impl("upsample_bilinear2d_backward", TORCH_FN(upsample_bilinear2d_backward));

  // ======== neural-network ops: activation.cpp, norm.cpp, softmax.cpp, loss.cpp, pointwise.cpp
  // ========
  // activation.cpp
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_", TORCH_FN(gelu_));
  m.impl("gelu.out", TORCH_FN(gelu_out));
  m.impl("gelu_backward", TORCH_FN(gelu_backward));
  m.impl("silu", TORCH_FN(silu));
  m.impl("silu_", TORCH_FN(silu_));
  m.impl("silu.out", TORCH_FN(silu_out));
  m.impl("silu_backward", TORCH_FN(silu_backward));
  m.impl("softplus", TORCH_FN(softplus));
  m.impl("softplus.out", TORCH_FN(softplus_out));
  m.impl("softplus_backward", TORCH_FN(softplus_backward));
  m.impl("leaky_relu", TORCH_FN(leaky_relu));
  m.impl("leaky_relu_", TORCH_FN(leaky_relu_));
  m.impl("leaky_relu.out", TORCH_FN(leaky_relu_out));
  m.impl("leaky_relu_backward", TORCH_FN(leaky_relu_backward));
  m.impl("elu", TORCH_FN(elu));
  m.impl("elu_", TORCH_FN(elu_));
  m.impl("elu.out", TORCH_FN(elu_out));
  m.impl("elu_backward", TORCH_FN(elu_backward));
  m.impl("hardtanh", TORCH_FN(hardtanh));
  m.impl("hardtanh_", TORCH_FN(hardtanh_));
  m.impl("hardtanh.out", TORCH_FN(hardtanh_out));
  m.impl("hardtanh_backward", TORCH_FN(hardtanh_backward));
  m.impl("hardswish", TORCH_FN(hardswish));
  m.impl("hardswish_", TORCH_FN(hardswish_));
  m.impl("hardswish.out", TORCH_FN(hardswish_out));
  m.impl("hardswish_backward", TORCH_FN(hardswish_backward));
  m.impl("hardsigmoid", TORCH_FN(hardsigmoid));
  m.impl("hardsigmoid_", TORCH_FN(hardsigmoid_));
  m.impl("hardsigmoid.out", TORCH_FN(hardsigmoid_out));
  m.impl("hardsigmoid_backward", TORCH_FN(hardsigmoid_backward));
  m.impl("sigmoid_backward", TORCH_FN(sigmoid_backward));
  m.impl("tanh_backward", TORCH_FN(tanh_backward));

  // softmax.cpp
  m.impl("_softmax", TORCH_FN(softmax));
  m.impl("_softmax.out", TORCH_FN(softmax_out));
  m.impl("_log_softmax", TORCH_FN(log_softmax));
  m.impl("_log_softmax.out", TORCH_FN(log_softmax_out));
  m.impl("_softmax_backward_data", TORCH_FN(softmax_backward));
  m.impl("_softmax_backward_data.out", TORCH_FN(softmax_backward_out));
  m.impl("_log_softmax_backward_data", TORCH_FN(log_softmax_backward));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(log_softmax_backward_out));

  // attention.cpp
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fused_attention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(fused_attention_backward));

  // norm.cpp
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  m.impl("_fused_rms_norm", TORCH_FN(fused_rms_norm));
  m.impl("_fused_rms_norm_backward", TORCH_FN(fused_rms_norm_backward));
  m.impl("_weight_norm_interface", TORCH_FN(weight_norm_interface));
  m.impl("_weight_norm_interface_backward", TORCH_FN(weight_norm_interface_backward));

  // pointwise.cpp
  m.impl("where.self", TORCH_FN(where_self));
  m.impl("where.self_out", TORCH_FN(where_self_out));
  m.impl("masked_fill.Scalar", TORCH_FN(masked_fill_scalar));
  m.impl("masked_fill.Tensor", TORCH_FN(masked_fill_tensor));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_scalar_));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill_tensor_));
  m.impl("clamp", TORCH_FN(clamp));
  m.impl("clamp.out", TORCH_FN(clamp_out));
  m.impl("clamp_", TORCH_FN(clamp_));
  m.impl("clamp.Tensor", TORCH_FN(clamp_tensor));
  m.impl("clamp.Tensor_out", TORCH_FN(clamp_tensor_out));
  m.impl("clamp_.Tensor", TORCH_FN(clamp_tensor_));
  m.impl("clamp_min", TORCH_FN(clamp_min));
  m.impl("clamp_min.out", TORCH_FN(clamp_min_out));
  m.impl("clamp_min_", TORCH_FN(clamp_min_));
  m.impl("clamp_min.Tensor", TORCH_FN(clamp_min_tensor));
  m.impl("clamp_min.Tensor_out", TORCH_FN(clamp_min_tensor_out));
  m.impl("clamp_min_.Tensor", TORCH_FN(clamp_min_tensor_));
  m.impl("clamp_max", TORCH_FN(clamp_max));
  m.impl("clamp_max.out", TORCH_FN(clamp_max_out));
  m.impl("clamp_max_", TORCH_FN(clamp_max_));
  m.impl("clamp_max.Tensor", TORCH_FN(clamp_max_tensor));
  m.impl("clamp_max.Tensor_out", TORCH_FN(clamp_max_tensor_out));
  m.impl("clamp_max_.Tensor", TORCH_FN(clamp_max_tensor_));
  m.impl("lerp.Scalar", TORCH_FN(lerp_scalar));
  m.impl("lerp.Scalar_out", TORCH_FN(lerp_scalar_out));
  m.impl("lerp_.Scalar", TORCH_FN(lerp_scalar_));
  m.impl("lerp.Tensor", TORCH_FN(lerp_tensor));
  m.impl("lerp.Tensor_out", TORCH_FN(lerp_tensor_out));
  m.impl("lerp_.Tensor", TORCH_FN(lerp_tensor_));
  m.impl("addcmul", TORCH_FN(addcmul));
  m.impl("addcmul.out", TORCH_FN(addcmul_out));
  m.impl("addcmul_", TORCH_FN(addcmul_));
  m.impl("addcdiv", TORCH_FN(addcdiv));
  m.impl("addcdiv.out", TORCH_FN(addcdiv_out));
  m.impl("addcdiv_", TORCH_FN(addcdiv_));
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("nan_to_num", TORCH_FN(nan_to_num));
  m.impl("nan_to_num.out", TORCH_FN(nan_to_num_out));
  m.impl("nan_to_num_", TORCH_FN(nan_to_num_));

  // loss.cpp
  m.impl("mse_loss", TORCH_FN(mse_loss));
  m.impl("mse_loss.out", TORCH_FN(mse_loss_out));
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));

  // nll_loss.cpp
  m.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out));
  m.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));

  // batch_norm.cpp
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("_native_batch_norm_legit", TORCH_FN(native_batch_norm_legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(native_batch_norm_legit_no_stats));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));

  // group_norm.cpp
  m.impl("native_group_norm", TORCH_FN(native_group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(native_group_norm_backward));

  // loss_extra.cpp
  m.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy));
  m.impl("binary_cross_entropy.out", TORCH_FN(binary_cross_entropy_out));
  m.impl("binary_cross_entropy_backward", TORCH_FN(binary_cross_entropy_backward));
  m.impl("binary_cross_entropy_with_logits", TORCH_FN(binary_cross_entropy_with_logits));
  m.impl("log_sigmoid_forward", TORCH_FN(log_sigmoid_forward));
  m.impl("log_sigmoid_forward.output", TORCH_FN(log_sigmoid_forward_out));
  m.impl("log_sigmoid_backward", TORCH_FN(log_sigmoid_backward));
  m.impl("log_sigmoid_backward.grad_input", TORCH_FN(log_sigmoid_backward_out));
  m.impl("smooth_l1_loss", TORCH_FN(smooth_l1_loss));
  m.impl("smooth_l1_loss.out", TORCH_FN(smooth_l1_loss_out));
  m.impl("smooth_l1_loss_backward", TORCH_FN(smooth_l1_loss_backward));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(smooth_l1_loss_backward_out));
  m.impl("huber_loss", TORCH_FN(huber_loss));
  m.impl("huber_loss.out", TORCH_FN(huber_loss_out));
  m.impl("huber_loss_backward", TORCH_FN(huber_loss_backward));
  m.impl("huber_loss_backward.out", TORCH_FN(huber_loss_backward_out));

  // distributions.cpp
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("geometric_", TORCH_FN(geometric_));

  // random_extra.cpp
  m.impl("randperm", TORCH_FN(randperm));
  m.impl("randperm.generator", TORCH_FN(randperm_generator));
  m.impl("randperm.out", TORCH_FN(randperm_out));
  m.impl("randperm.generator_out", TORCH_FN(randperm_generator_out));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));

  // ======== end of neural-network ops ========

  // The two sections below and above are kept apart so that work on each merges cleanly.

  // ======== indexing and shape: index.cpp, shape.cpp ========
  // index.cpp
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_select.out", TORCH_FN(index_select_out));
  m.impl("gather", TORCH_FN(gather));
  m.impl("gather.out", TORCH_FN(gather_out));
  m.impl("scatter.src_out", TORCH_FN(scatter_src_out));
  m.impl("scatter.src",
         [](const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
           at::Tensor out = self.new_empty({0});
           return scatter_src_out(self, dim, index, src, out);
         });
  m.impl("scatter_.src",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src)
             -> at::Tensor& { return scatter_src_out(self, dim, index, src, self); });
  m.impl("scatter.value_out", TORCH_FN(scatter_value_out));
  m.impl("scatter.value", [](const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             const c10::Scalar& value) {
    at::Tensor out = self.new_empty({0});
    return scatter_value_out(self, dim, index, value, out);
  });
  m.impl("scatter_.value",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value)
             -> at::Tensor& { return scatter_value_out(self, dim, index, value, self); });
  m.impl("scatter.reduce_out", TORCH_FN(scatter_reduce_out));
  m.impl("scatter.reduce", [](const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Tensor& src, c10::string_view reduce) {
    at::Tensor out = self.new_empty({0});
    return scatter_reduce_out(self, dim, index, src, reduce, out);
  });
  m.impl("scatter_.reduce",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
            c10::string_view reduce) -> at::Tensor& {
           return scatter_reduce_out(self, dim, index, src, reduce, self);
         });
  m.impl("scatter.value_reduce_out", TORCH_FN(scatter_value_reduce_out));
  m.impl("scatter.value_reduce", [](const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                    const c10::Scalar& value, c10::string_view reduce) {
    at::Tensor out = self.new_empty({0});
    return scatter_value_reduce_out(self, dim, index, value, reduce, out);
  });
  m.impl("scatter_.value_reduce",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
            c10::string_view reduce) -> at::Tensor& {
           return scatter_value_reduce_out(self, dim, index, value, reduce, self);
         });
  m.impl("scatter_add.out", TORCH_FN(scatter_add_out));
  m.impl("scatter_add",
         [](const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
           at::Tensor out = self.new_empty({0});
           return scatter_add_out(self, dim, index, src, out);
         });
  m.impl("scatter_add_",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src)
             -> at::Tensor& { return scatter_add_out(self, dim, index, src, self); });
  m.impl("scatter_reduce.two_out", TORCH_FN(scatter_reduce_two_out));
  m.impl("scatter_reduce.two",
         [](const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
            c10::string_view reduce, bool include_self) {
           at::Tensor out = self.new_empty({0});
           return scatter_reduce_two_out(self, dim, index, src, reduce, include_self, out);
         });
  m.impl("scatter_reduce_.two",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
            c10::string_view reduce, bool include_self) -> at::Tensor& {
           return scatter_reduce_two_out(self, dim, index, src, reduce, include_self, self);
         });
  m.impl("index_copy.out", TORCH_FN(index_copy_out));
  m.impl("index_copy", [](const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& source) {
    at::Tensor out = self.new_empty({0});
    return index_copy_out(self, dim, index, source, out);
  });
  m.impl("index_copy_",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source)
             -> at::Tensor& { return index_copy_out(self, dim, index, source, self); });
  m.impl("index_add.out", TORCH_FN(index_add_out));
  m.impl("index_add", [](const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor& source, const c10::Scalar& alpha) {
    at::Tensor out = self.new_empty({0});
    return index_add_out(self, dim, index, source, alpha, out);
  });
  m.impl("index_add_",
         [](at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
            const c10::Scalar& alpha) -> at::Tensor& {
           return index_add_out(self, dim, index, source, alpha, self);
         });
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));

  // index_advanced.cpp
  m.impl("index.Tensor", TORCH_FN(index));
  m.impl("index.Tensor_out", TORCH_FN(index_out));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl_));
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("masked_select.out", TORCH_FN(masked_select_out));
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzero_out));

  // shape.cpp
  m.impl("cat", TORCH_FN(cat));
  m.impl("cat.out", TORCH_FN(cat_out));
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
  m.impl("tril", TORCH_FN(tril));
  m.impl("tril.out", TORCH_FN(tril_out));
  m.impl("tril_", TORCH_FN(tril_));
  m.impl("triu", TORCH_FN(triu));
  m.impl("triu.out", TORCH_FN(triu_out));
  m.impl("triu_", TORCH_FN(triu_));
  m.impl("constant_pad_nd", TORCH_FN(constant_pad_nd));
#define TPU_REGISTER_PAD(name)                          \
  m.impl(#name, TORCH_FN(name));                        \
  m.impl(#name ".out", TORCH_FN(name##_out));           \
  m.impl(#name "_backward", TORCH_FN(name##_backward)); \
  m.impl(#name "_backward.grad_input", TORCH_FN(name##_backward_out));
  TPU_REGISTER_PAD(reflection_pad1d)
  TPU_REGISTER_PAD(reflection_pad2d)
  TPU_REGISTER_PAD(replication_pad1d)
  TPU_REGISTER_PAD(replication_pad2d)
#undef TPU_REGISTER_PAD

  // ======== end of indexing and shape ========

  // ======== mixed precision: amp.cpp (torch.amp.GradScaler) ========
  m.impl("_amp_foreach_non_finite_check_and_unscale_",
         TORCH_FN(amp_foreach_non_finite_check_and_unscale_));
  m.impl("_amp_update_scale_", TORCH_FN(amp_update_scale_));
  // ======== end of mixed precision ========
}

}  // namespace tpu::aten
