// The tpu ATen surface in one place: which schema runs which kernel. Everything
// not listed here runs on the CPU through the fallback (fallback.cpp).
#include <torch/library.h>

#include "aten/ops.h"

namespace tpu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // factories.cpp
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar_));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor_));
  m.impl("zero_", TORCH_FN(zero_));
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
  m.impl("pow_.Tensor", [](at::Tensor& self, const at::Tensor& exponent) -> at::Tensor& {
    return binary_in_place("aten::pow_.Tensor", &binary::pow, BinaryKind::Numeric, self,
                           TPU_TENSOR(exponent));
  });
  m.impl("pow_.Scalar", [](at::Tensor& self, const c10::Scalar& exponent) -> at::Tensor& {
    return binary_in_place("aten::pow_.Scalar", &binary::pow, BinaryKind::Numeric, self,
                           TPU_SCALAR(exponent));
  });
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

  // ======== end of reductions and sorting ========

  // matmul.cpp
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("addmm_", TORCH_FN(addmm_));

  // ======== neural-network ops: activation.cpp, norm.cpp, softmax.cpp, loss.cpp, pointwise.cpp
  // ======== loss.cpp
  m.impl("mse_loss", TORCH_FN(mse_loss));
  m.impl("mse_loss.out", TORCH_FN(mse_loss_out));
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));

  // ======== end of neural-network ops ========

  // The two sections below and above are kept apart so that work on each merges cleanly.

  // ======== indexing and shape: index.cpp, shape.cpp ========

  // ======== end of indexing and shape ========
}

}  // namespace tpu::aten
