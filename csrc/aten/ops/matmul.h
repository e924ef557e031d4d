#pragma once
// Matrix products.
// Implemented in matmul.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

// What a matrix product's program depends on beyond its operands' metadata (a PreparedCall
// static): the float32 matmul precision (a precision_config in the program) and whether it
// calls the host matmul kernels.
int64_t matmul_setting();
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                   const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                   const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                     const c10::Scalar& beta, const c10::Scalar& alpha);

}  // namespace tpu::aten
