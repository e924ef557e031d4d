// Resampling along H and W as products with small interpolation matrices built
// in-program from iotas: _adaptive_avg_pool2d, upsample_nearest2d and
// upsample_bilinear2d, forward and backward (the backward is the transposed product).
#include <ATen/ops/empty.h>

#include <cmath>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

Value splat(Builder& b, double v, ElementType type, const std::vector<int64_t>& dims) {
  return b.broadcast_to(b.constant(v, type), dims);
}

// [out, in] averaging matrix of adaptive pooling: row i averages [floor(i*in/out),
// ceil((i+1)*in/out)).
Value adaptive_matrix(Builder& b, int64_t out, int64_t in, ElementType type) {
  std::vector<int64_t> dims{out, in};
  Value i = b.iota(TensorType{ElementType::S64, dims}, 0);
  Value j = b.iota(TensorType{ElementType::S64, dims}, 1);
  Value start = b.binary("divide", b.binary("multiply", i, splat(b, in, ElementType::S64, dims)),
                         splat(b, out, ElementType::S64, dims));
  Value next = b.binary("add", i, splat(b, 1, ElementType::S64, dims));
  Value end =
      b.binary("divide",
               b.binary("add", b.binary("multiply", next, splat(b, in, ElementType::S64, dims)),
                        splat(b, out - 1, ElementType::S64, dims)),
               splat(b, out, ElementType::S64, dims));
  Value inside =
      b.binary("and", b.compare(hlo::Compare::GE, j, start), b.compare(hlo::Compare::LT, j, end));
  Value count = b.convert(b.binary("subtract", end, start), type);
  return b.select(inside, b.binary("divide", splat(b, 1, type, dims), count),
                  splat(b, 0, type, dims));
}

// Source coordinate of output index `dst` (as PyTorch's area_pixel_compute_source_index).
Value source_coordinate(Builder& b, const Value& dst, int64_t in, int64_t out,
                        std::optional<double> scale, bool align_corners, bool cubic_like) {
  ElementType f = dst.element();
  double ratio;
  if (align_corners) {
    ratio = out > 1 ? static_cast<double>(in - 1) / (out - 1) : 0.0;
    return b.binary("multiply", dst, splat(b, ratio, f, dst.dims()));
  }
  ratio = scale.has_value() && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / out;
  Value src = b.binary("subtract",
                       b.binary("multiply", b.binary("add", dst, splat(b, 0.5, f, dst.dims())),
                                splat(b, ratio, f, dst.dims())),
                       splat(b, 0.5, f, dst.dims()));
  return cubic_like ? src : b.binary("maximum", src, splat(b, 0, f, dst.dims()));
}

// [out, in] linear interpolation matrix.
Value bilinear_matrix(Builder& b, int64_t out, int64_t in, std::optional<double> scale,
                      bool align_corners, ElementType type) {
  std::vector<int64_t> dims{out, in};
  Value dst = b.convert(b.iota(TensorType{ElementType::S64, dims}, 0), ElementType::F32);
  Value src = source_coordinate(b, dst, in, out, scale, align_corners, false);
  Value low = b.unary("floor", src);
  Value lambda = b.binary("subtract", src, low);
  Value i0 = b.binary("minimum", b.convert(low, ElementType::S64),
                      splat(b, in - 1, ElementType::S64, dims));
  Value i1 = b.binary("minimum", b.binary("add", i0, splat(b, 1, ElementType::S64, dims)),
                      splat(b, in - 1, ElementType::S64, dims));
  Value j = b.iota(TensorType{ElementType::S64, dims}, 1);
  Value zero = splat(b, 0, ElementType::F32, dims);
  Value w0 = b.select(b.compare(hlo::Compare::EQ, j, i0),
                      b.binary("subtract", splat(b, 1, ElementType::F32, dims), lambda), zero);
  Value w1 = b.select(b.compare(hlo::Compare::EQ, j, i1), lambda, zero);
  return b.convert(b.binary("add", w0, w1), type);
}

// [out, in] one-hot matrix of nearest-neighbour upsampling: src = min(floor(dst * scale), in - 1).
Value nearest_matrix(Builder& b, int64_t out, int64_t in, std::optional<double> scale,
                     ElementType type) {
  std::vector<int64_t> dims{out, in};
  double ratio = scale.has_value() && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / out;
  Value dst = b.convert(b.iota(TensorType{ElementType::S64, dims}, 0), ElementType::F32);
  Value src = b.convert(
      b.unary("floor", b.binary("multiply", dst, splat(b, ratio, ElementType::F32, dims))),
      ElementType::S64);
  src = b.binary("minimum", src, splat(b, in - 1, ElementType::S64, dims));
  Value j = b.iota(TensorType{ElementType::S64, dims}, 1);
  return b.select(b.compare(hlo::Compare::EQ, j, src), splat(b, 1, type, dims),
                  splat(b, 0, type, dims));
}

// y[..., i, j] = sum_{h,w} rows[i, h] * x[..., h, w] * cols[j, w]  (x has rank >= 2).
Value resample(Builder& b, const Value& x, const Value& rows, const Value& cols) {
  const int64_t r = x.rank();
  // Contract W with cols: [..., H, W] x [Wo, W] -> [..., H, Wo]
  Value along_w = b.dot_general(x, cols, {}, {}, {r - 1}, {1}, x.element());
  // Contract H with rows: [..., H, Wo] x [Ho, H] -> [..., Wo, Ho], then swap back.
  Value along_h = b.dot_general(along_w, rows, {}, {}, {r - 2}, {1}, x.element());
  std::vector<int64_t> permutation;
  for (int64_t d = 0; d < r - 2; ++d) permutation.push_back(d);
  permutation.push_back(r - 1);
  permutation.push_back(r - 2);
  return b.transpose(along_h, permutation);
}

Value transpose2(Builder& b, const Value& m) { return b.transpose(m, {1, 0}); }

enum class Kind { Adaptive, Nearest, Bilinear };

struct Resampling {
  Kind kind;
  bool align_corners = false;
  std::optional<double> scale_h, scale_w;
};

std::pair<Value, Value> matrices(Builder& b, const Resampling& r, int64_t out_h, int64_t out_w,
                                 int64_t in_h, int64_t in_w, ElementType type) {
  switch (r.kind) {
    case Kind::Adaptive:
      return {adaptive_matrix(b, out_h, in_h, type), adaptive_matrix(b, out_w, in_w, type)};
    case Kind::Nearest:
      return {nearest_matrix(b, out_h, in_h, r.scale_h, type),
              nearest_matrix(b, out_w, in_w, r.scale_w, type)};
    case Kind::Bilinear:
      return {bilinear_matrix(b, out_h, in_h, r.scale_h, r.align_corners, type),
              bilinear_matrix(b, out_w, in_w, r.scale_w, r.align_corners, type)};
  }
  TORCH_INTERNAL_ASSERT(false);
}

// The dtypes the CPU's kernels take, with their words for the others: floating types, and
// uint8 for upsampling (adaptive pooling takes no integers).
void check_dtype(const at::Tensor& self, const Resampling& r) {
  const c10::ScalarType type = self.scalar_type();
  if (c10::isFloatingType(type)) return;
  const char* kernel = r.kind == Kind::Adaptive  ? "adaptive_avg_pool2d"
                       : r.kind == Kind::Nearest ? "upsample_nearest2d_channels_last"
                                                 : "upsample_bilinear2d_channels_last";
  TORCH_CHECK_NOT_IMPLEMENTED(r.kind != Kind::Adaptive && type == c10::kByte, "\"", kernel,
                              "\" not implemented for '", c10::toString(type), "'");
}

at::Tensor forward(const char* name, const at::Tensor& self, int64_t out_h, int64_t out_w,
                   const Resampling& r) {
  TORCH_CHECK(self.dim() >= 3, name, ": expected a 3-d or 4-d input, got ", self.sizes());
  check_dtype(self, r);
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.push_back(out_h);
  shape.push_back(out_w);
  // In the input's memory format, as the CPU lays its result out.
  at::Tensor out = at::empty(shape, self.options().memory_format(self.suggest_memory_format()));
  if (out.numel() == 0) return out;
  // uint8 images interpolate in float32, rounded to the nearest integer and saturated, as
  // the CPU's uint8 kernels are (within 1 of them: those use 16-bit fixed-point weights).
  const bool bytes = self.scalar_type() == c10::kByte;
  c10::ScalarType accumulate = bytes ? c10::kFloat : opmath_type(self.scalar_type());
  Program p(name);
  Builder& b = p.b();
  auto [rows, cols] =
      matrices(b, r, out_h, out_w, self.size(-2), self.size(-1), element_type(accumulate));
  Value result = resample(b, p.read(self, accumulate), rows, cols);
  if (bytes) {
    result = b.unary("round_nearest_even", result);
    result = b.binary("maximum", result, splat(b, 0, ElementType::F32, result.dims()));
    result = b.binary("minimum", result, splat(b, 255, ElementType::F32, result.dims()));
  }
  p.write(out, result);
  p.run();
  return out;
}

at::Tensor backward(const char* name, const at::Tensor& grad_output, c10::IntArrayRef input_size,
                    const Resampling& r) {
  at::Tensor grad_input = at::empty(
      input_size, grad_output.options().memory_format(grad_output.suggest_memory_format()));
  if (grad_input.numel() == 0) return grad_input;
  c10::ScalarType accumulate = opmath_type(grad_output.scalar_type());
  int64_t in_h = input_size[input_size.size() - 2], in_w = input_size[input_size.size() - 1];
  Program p(name);
  Builder& b = p.b();
  auto [rows, cols] = matrices(b, r, grad_output.size(-2), grad_output.size(-1), in_h, in_w,
                               element_type(accumulate));
  p.write(grad_input,
          resample(b, p.read(grad_output, accumulate), transpose2(b, rows), transpose2(b, cols)));
  p.run();
  return grad_input;
}

}  // namespace

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  return forward("aten::_adaptive_avg_pool2d", self, output_size[0], output_size[1],
                 Resampling{Kind::Adaptive});
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  for (int64_t d = 1; d < grad_output.dim(); ++d) {
    TORCH_CHECK(grad_output.size(d) != 0,
                "adaptive_avg_pool2d_backward(): Expected grad_output to have non-zero size for "
                "non-batch dimensions, but grad_output has sizes ",
                grad_output.sizes(), " with dimension ", d, " being empty");
  }
  return backward("aten::_adaptive_avg_pool2d_backward", grad_output, self.sizes(),
                  Resampling{Kind::Adaptive});
}

at::Tensor upsample_nearest2d(const at::Tensor& self, c10::IntArrayRef output_size,
                              std::optional<double> scales_h, std::optional<double> scales_w) {
  return forward("aten::upsample_nearest2d", self, output_size[0], output_size[1],
                 Resampling{Kind::Nearest, false, scales_h, scales_w});
}

at::Tensor upsample_nearest2d_backward(const at::Tensor& grad_output, c10::IntArrayRef output_size,
                                       c10::IntArrayRef input_size, std::optional<double> scales_h,
                                       std::optional<double> scales_w) {
  return backward("aten::upsample_nearest2d_backward", grad_output, input_size,
                  Resampling{Kind::Nearest, false, scales_h, scales_w});
}

at::Tensor upsample_bilinear2d(const at::Tensor& self, c10::IntArrayRef output_size,
                               bool align_corners, std::optional<double> scales_h,
                               std::optional<double> scales_w) {
  return forward("aten::upsample_bilinear2d", self, output_size[0], output_size[1],
                 Resampling{Kind::Bilinear, align_corners, scales_h, scales_w});
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_output, c10::IntArrayRef output_size,
                                        c10::IntArrayRef input_size, bool align_corners,
                                        std::optional<double> scales_h,
                                        std::optional<double> scales_w) {
  return backward("aten::upsample_bilinear2d_backward", grad_output, input_size,
                  Resampling{Kind::Bilinear, align_corners, scales_h, scales_w});
}

}  // namespace tpu::aten
