#pragma once
// Reductions: sum, mean, prod, min/max, norms, var/std, logsumexp.
// Implemented in reduce.cpp, reduce_stats.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor sum(const at::Tensor& self, OptionalDtype dtype);
at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   OptionalDtype dtype);
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    OptionalDtype dtype, at::Tensor& out);
at::Tensor mean(const at::Tensor& self, OptionalDtype dtype);
at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    OptionalDtype dtype);
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     OptionalDtype dtype, at::Tensor& out);
at::Tensor& mean_dtype_out(const at::Tensor& self, OptionalDtype dtype, at::Tensor& out);
at::Tensor prod(const at::Tensor& self, OptionalDtype dtype);
at::Tensor prod_dim(const at::Tensor& self, int64_t dim, bool keepdim, OptionalDtype dtype);
at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim, OptionalDtype dtype,
                     at::Tensor& out);
at::Tensor amax(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim);
at::Tensor& amax_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out);
at::Tensor amin(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim);
at::Tensor& amin_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out);
at::Tensor max(const at::Tensor& self);
at::Tensor& max_unary_out(const at::Tensor& self, at::Tensor& out);
at::Tensor min(const at::Tensor& self);
at::Tensor& min_unary_out(const at::Tensor& self, at::Tensor& out);
TensorPair max_dim(const at::Tensor& self, int64_t dim, bool keepdim);
TensorRefPair max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                          at::Tensor& indices);
TensorPair min_dim(const at::Tensor& self, int64_t dim, bool keepdim);
TensorRefPair min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                          at::Tensor& indices);
at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim);
at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out);
at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim);
at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out);
at::Tensor any(const at::Tensor& self);
at::Tensor any_dim(const at::Tensor& self, int64_t dim, bool keepdim);
at::Tensor any_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);
at::Tensor& any_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out);
at::Tensor& any_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out);
at::Tensor& any_all_out(const at::Tensor& self, at::Tensor& out);
at::Tensor all(const at::Tensor& self);
at::Tensor all_dim(const at::Tensor& self, int64_t dim, bool keepdim);
at::Tensor all_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);
at::Tensor& all_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out);
at::Tensor& all_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out);
at::Tensor& all_all_out(const at::Tensor& self, at::Tensor& out);
at::Tensor var_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const OptionalScalar& correction, bool keepdim);
at::Tensor std_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const OptionalScalar& correction, bool keepdim);
TensorPair var_mean_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim);
TensorPair std_mean_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim);
at::Tensor& var_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim, at::Tensor& out);
at::Tensor& std_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim, at::Tensor& out);
at::Tensor linalg_vector_norm(const at::Tensor& self, const c10::Scalar& ord,
                              at::OptionalIntArrayRef dim, bool keepdim, OptionalDtype dtype);
at::Tensor& linalg_vector_norm_out(const at::Tensor& self, const c10::Scalar& ord,
                                   at::OptionalIntArrayRef dim, bool keepdim, OptionalDtype dtype,
                                   at::Tensor& out);
at::Tensor norm_dim(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                    bool keepdim);
at::Tensor norm_dim_dtype(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                          bool keepdim, c10::ScalarType dtype);
at::Tensor& norm_out(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                     bool keepdim, at::Tensor& out);
at::Tensor& norm_dtype_out(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                           bool keepdim, c10::ScalarType dtype, at::Tensor& out);
at::Tensor logsumexp(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim);
at::Tensor& logsumexp_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim,
                          at::Tensor& out);

}  // namespace tpu::aten
