// Scaled dot-product attention as one program per direction. PyTorch's
// F.scaled_dot_product_attention asks each device which kernel to use (_fused_sdp_choice_stub);
// without an answer it runs its math path, about a dozen ops per call (the causal mask built
// with ones and tril, the scaling, the product, a "safe" softmax made of softmax, isneginf, all
// and where, the second product) and twice that in its backward. We answer "overrideable" for
// the cases below, and run _scaled_dot_product_fused_attention_overrideable (and its backward,
// which autograd calls through derivatives.yaml) as one program each, which XLA fuses whole.
//
// Results match the math path's: a row whose every score is masked gives zeros, not NaNs.
// The softmax is computed from the row maximum, in float32 for half inputs; the backward
// recomputes it rather than have the forward keep the [L, S] probabilities.
#include "host_kernels/attention.h"

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Value;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Whether `mask` broadcasts to `target` (NumPy rules, trailing dimensions aligned).
// Symbolic sizes too: torch.compile(dynamic=True) asks with fake tensors.
bool broadcasts_to(c10::SymIntArrayRef mask, c10::SymIntArrayRef target) {
  if (mask.size() > target.size()) return false;
  const size_t lead = target.size() - mask.size();
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] != 1 && mask[i] != target[lead + i]) return false;
  }
  return true;
}

// The cases the fused program serves: 3-D (heads, length, dim) or 4-D (batch, heads, length,
// dim) floating tpu tensors of one dtype, keys and values with the queries' batch and heads,
// no dropout (it needs the math path's random mask), and an attention mask that broadcasts to
// the scores (with is_causal too, as on PyTorch's CPU, whose math path alone rejects the pair).
// Everything else (grouped-query heads, nested tensors, a query broadcast over the keys' batch)
// keeps the math path.
bool fused_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::optional<at::Tensor>& mask, double dropout_p) {
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  if (q.dim() != 3 && q.dim() != 4) return false;
  if (k.dim() != q.dim() || v.dim() != q.dim()) return false;
  for (const at::Tensor* t : {&q, &k, &v}) {
    if (!t->is_privateuseone() || t->scalar_type() != q.scalar_type() || t->sym_numel() == 0) {
      return false;
    }
  }
  const c10::ScalarType type = q.scalar_type();
  if (type != c10::kFloat && type != c10::kHalf && type != c10::kBFloat16 && type != c10::kDouble) {
    return false;
  }
  const int64_t batch_dims = q.dim() - 2;
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (k.sym_size(d) != q.sym_size(d) || v.sym_size(d) != q.sym_size(d)) return false;
  }
  if (k.sym_size(-1) != q.sym_size(-1) || v.sym_size(-2) != k.sym_size(-2)) return false;
  if (dropout_p > 0.0) return false;
  if (defined(mask)) {
    if (!mask->is_privateuseone()) return false;
    if (mask->scalar_type() != c10::kBool && mask->scalar_type() != type) return false;
    std::vector<c10::SymInt> scores = q.sym_sizes().vec();
    scores.back() = k.sym_size(-2);
    if (!broadcasts_to(mask->sym_sizes(), scores)) return false;
  }
  return true;
}

int64_t choose_attention_kernel(const at::Tensor& query, const at::Tensor& key,
                                const at::Tensor& value, const std::optional<at::Tensor>& attn_mask,
                                double dropout_p, bool /*is_causal*/,
                                std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  const auto& context = at::globalContext();
  if (context.userEnabledOverrideableSDP() &&
      fused_attention_applies(query, key, value, attn_mask, dropout_p)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  // Neither allowed: PyTorch reports that no kernel is available, as on other devices.
  return static_cast<int64_t>(context.userEnabledMathSDP() ? at::SDPBackend::math
                                                           : at::SDPBackend::error);
}

// The shapes every tensor is flattened to: q [n, L, E], k [n, S, E], v [n, S, Ev].
struct Shape {
  int64_t n, L, S, E, Ev;
  std::vector<int64_t> batch;  // q's leading dimensions, whose product is n
  std::vector<int64_t> scores() const {
    std::vector<int64_t> dims = batch;
    dims.push_back(L);
    dims.push_back(S);
    return dims;
  }
};

Shape shape_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  Shape s;
  s.batch.assign(q.sizes().begin(), q.sizes().end() - 2);
  s.n = std::accumulate(s.batch.begin(), s.batch.end(), int64_t{1}, std::multiplies<>());
  s.L = q.size(-2);
  s.E = q.size(-1);
  s.S = k.size(-2);
  s.Ev = v.size(-1);
  return s;
}

void check_fused_inputs(const char* name, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const at::Tensor* bias, double dropout_p) {
  TORCH_CHECK(q.dim() == 3 || q.dim() == 4, name,
              ": query must be 3-D (heads, length, dim) or 4-D (batch, heads, length, dim), got ",
              q.dim(), "-D");
  TORCH_CHECK(bias == nullptr || bias->scalar_type() == q.scalar_type(), name,
              ": attn_bias must have the query's dtype ", q.scalar_type(), ", got ",
              bias == nullptr ? q.scalar_type() : bias->scalar_type());
  std::optional<at::Tensor> mask;
  if (bias != nullptr) mask = *bias;
  TORCH_CHECK(fused_attention_applies(q, k, v, mask, dropout_p), name,
              ": unsupported inputs: query ", q.sizes(), " ", q.scalar_type(), ", key ", k.sizes(),
              " ", k.scalar_type(), ", value ", v.sizes(), " ", v.scalar_type(),
              bias != nullptr ? ", attn_bias " : "",
              bias != nullptr ? c10::str(bias->sizes(), " ", bias->scalar_type()) : "",
              ", dropout_p ", dropout_p,
              " (tpu's fused attention takes floating tensors of one dtype on the device, keys "
              "and values with the queries' batch and heads, and no dropout)");
}

double default_scale(const at::Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// The scaled scores q k^T, with the bias added and the causal mask applied: [n, L, S].
Value scores(Program& p, const Shape& s, const Value& q, const Value& k, const at::Tensor* bias,
             bool is_causal, const c10::Scalar& scale, c10::ScalarType compute) {
  Builder& b = p.b();
  const std::vector<int64_t> dims{s.n, s.L, s.S};
  Value result = b.dot_general(q, b.transpose(k, {0, 2, 1}), {0}, {0}, {2}, {1}, q.element());
  result = b.binary("multiply", result, b.broadcast_to(p.scalar(scale, compute), dims));
  if (bias != nullptr) {
    result = b.binary("add", result,
                      b.reshape(b.broadcast_to(p.read(*bias, compute), s.scores()), dims));
  }
  if (is_causal) {  // query i sees keys 0..i (PyTorch's top-left aligned causal mask)
    const hlo::TensorType positions{hlo::ElementType::S32, {s.L, s.S}};
    Value keep = b.compare(hlo::Compare::GE, b.iota(positions, 0), b.iota(positions, 1));
    result = b.select(b.broadcast_in_dim(keep, dims, {1, 2}), result,
                      b.broadcast_to(b.constant(-kInfinity, result.element()), dims));
  }
  return result;
}

// A per-row value [n, L] broadcast over the keys.
Value rows(Builder& b, const Value& x, const Shape& s) {
  return b.broadcast_in_dim(x, {s.n, s.L, s.S}, {0, 1});
}

Value reduce_rows(Builder& b, const Value& x, double init, hlo::Reduction kind) {
  return b.reduce(x, b.constant(init, x.element()), kind, {2});
}

Value full(Builder& b, double value, const Value& like) {
  return b.broadcast_to(b.constant(value, like.element()), like.dims());
}

// softmax over the keys, from the row maximum. A row whose every score is -inf (fully masked)
// gets probabilities 0, as the math path's safe softmax gives, and log-sum-exp -inf.
struct Softmax {
  Value probabilities;  // [n, L, S]
  Value shift, total;   // [n, L]: log-sum-exp = shift + log(total)
};
Softmax softmax_rows(Builder& b, const Value& x, const Shape& s) {
  Value row_max = reduce_rows(b, x, -kInfinity, hlo::Reduction::Max);
  Value masked = b.compare(hlo::Compare::EQ, row_max, full(b, -kInfinity, row_max));
  Value shift = b.select(masked, full(b, 0, row_max), row_max);
  Value e = b.unary("exponential", b.binary("subtract", x, rows(b, shift, s)));
  Value total = reduce_rows(b, e, 0, hlo::Reduction::Add);
  Value safe_total = b.select(masked, full(b, 1, total), total);
  return {b.binary("divide", e, rows(b, safe_total, s)), shift, total};
}

// `value` of shape [n, rows, cols] back to the batch dimensions of q.
Value unflatten(Builder& b, const Value& value, const Shape& s) {
  std::vector<int64_t> dims = s.batch;
  dims.push_back(value.dims()[1]);
  dims.push_back(value.dims()[2]);
  return b.reshape(value, dims);
}

Value flat(Program& p, const at::Tensor& t, int64_t n, c10::ScalarType compute) {
  return p.b().reshape(p.read(t, compute), {n, t.size(-2), t.size(-1)});
}

// The output like PyTorch's meta function allocates it: in query's dimension order.
at::Tensor empty_in_layout_of(const at::Tensor& query, c10::IntArrayRef sizes) {
  if (query.sizes() == sizes) return at::empty_like(query);
  std::vector<int64_t> order(query.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  std::vector<int64_t> strides(query.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= sizes[*it];
  }
  return at::empty_strided(sizes, strides, query.options());
}

// On the CPU platform, float32 attention with no mask but the causal one runs PyTorch's CPU
// flash-attention kernel as a custom call (host_kernels/attention.h): the program around it
// only lays out q, k and v. Only 4-D inputs, where PyTorch's CPU picks that kernel too: for
// 3-D ones it takes the math path, whose gradients are several times more accurate where the
// scores are large (OpInfo's samples: 1.2e-5 against 1.4e-6), so those keep the XLA program.
bool on_host(const at::Tensor& q, const at::Tensor& v, const at::Tensor* bias) {
  return host_kernels::host_attention_enabled() && bias == nullptr && q.dim() == 4 &&
         q.scalar_type() == c10::kFloat && v.size(-1) == q.size(-1);
}

// How q, k, v, out and their gradients are handed to the kernel: [n, length, E] with n the
// batch times the heads, or, when the query is a view of a [batch, length, heads, E] array (a
// projection's output viewed as heads, x.view(B, L, H, E).transpose(1, 2)), in that order, so
// that XLA cancels the transposes that reading the view and writing the result would make.
struct HostLayout {
  bool heads_second;
  int64_t batch = 1, heads = 1;

  HostLayout(const at::Tensor& query, const Shape& s)
      : heads_second(query.dim() == 4 && query.stride(3) == 1 &&
                     query.stride(0) >= query.stride(2) && query.stride(2) >= query.stride(1) &&
                     query.size(1) > 1) {
    if (heads_second) {
      batch = query.size(0);
      heads = query.size(1);
    } else {
      heads = s.n;
    }
  }

  Value read(Program& p, const at::Tensor& t, c10::ScalarType compute) const {
    if (!heads_second) return flat(p, t, heads, compute);
    return p.b().transpose(p.read(t, compute), {0, 2, 1, 3});
  }
  hlo::TensorType type(int64_t length, int64_t width) const {
    if (!heads_second) return {hlo::ElementType::F32, {heads, length, width}};
    return {hlo::ElementType::F32, {batch, length, heads, width}};
  }
  std::vector<int64_t> lse_dims(int64_t length) const {
    if (!heads_second) return {heads, length};
    return {batch, heads, length};
  }
  Value result(Builder& b, const Value& value, const Shape& s) const {
    if (!heads_second) return unflatten(b, value, s);
    return b.transpose(value, {0, 2, 1, 3});
  }
};

std::vector<Value> host_attention(Builder& b, bool backward, bool is_causal, bool heads_second,
                                  const std::vector<Value>& operands,
                                  const std::vector<hlo::TensorType>& results) {
  return b.host_call(host_kernels::host_attention_target(backward, is_causal, heads_second),
                     operands, results);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool /*return_debug_mask*/, std::optional<double> scale) {
  static const char* const kName = "aten::_scaled_dot_product_fused_attention_overrideable";
  const at::Tensor* bias = defined(attn_bias) ? &*attn_bias : nullptr;
  check_fused_inputs(kName, query, key, value, bias, dropout_p);
  const Shape s = shape_of(query, key, value);
  std::vector<int64_t> out_sizes = query.sizes().vec();
  out_sizes.back() = s.Ev;
  at::Tensor out = empty_in_layout_of(query, out_sizes);
  // As PyTorch's meta function: float32, [batch, heads, L] (batch 1 for 3-D queries).
  std::vector<int64_t> lse_sizes{query.dim() == 4 ? query.size(0) : 1, query.size(-3), s.L};
  at::Tensor logsumexp = at::empty(lse_sizes, query.options().dtype(c10::kFloat));
  const c10::Scalar scale_value(default_scale(query, scale));
  const c10::ScalarType compute = opmath_type(query.scalar_type());

  PreparedCall call(kName, {&query, &key, &value, bias, &out, &logsumexp}, {&scale_value},
                    {is_causal, matmul_setting()});
  if (!call.run()) {
    Program p(kName, &call);
    p.compile_as_graph();
    Builder& b = p.b();
    if (on_host(query, value, bias)) {
      const hlo::ElementType f32 = hlo::ElementType::F32;
      const HostLayout layout(query, s);
      std::vector<Value> r =
          host_attention(b, /*backward=*/false, is_causal, layout.heads_second,
                         {layout.read(p, query, compute), layout.read(p, key, compute),
                          layout.read(p, value, compute), p.scalar(scale_value, compute)},
                         {layout.type(s.L, s.Ev), hlo::TensorType{f32, layout.lse_dims(s.L)}});
      p.write(out, layout.result(b, r[0], s));
      p.write(logsumexp, b.reshape(r[1], lse_sizes));
      p.run();
      return {out,
              logsumexp,
              at::Tensor(),
              at::Tensor(),
              c10::SymInt(s.L),
              c10::SymInt(s.S),
              at::empty({}, query.options().dtype(c10::kLong)),
              at::empty({}, query.options().dtype(c10::kLong)),
              at::Tensor()};
    }
    Value x = scores(p, s, flat(p, query, s.n, compute), flat(p, key, s.n, compute), bias,
                     is_causal, scale_value, compute);
    const Softmax softmax = softmax_rows(b, x, s);
    const Value& probabilities = softmax.probabilities;
    Value result = b.dot_general(probabilities, flat(p, value, s.n, compute), {0}, {0}, {2}, {1},
                                 probabilities.element());
    p.write(out, unflatten(b, result, s));
    p.write(logsumexp,
            b.reshape(b.binary("add", softmax.shift, b.unary("log", softmax.total)), lse_sizes));
    p.run();
  }
  at::Tensor no_sequence_lengths;  // only for nested (variable-length) inputs
  at::Tensor philox_seed = at::empty({}, query.options().dtype(c10::kLong));
  at::Tensor philox_offset = at::empty({}, query.options().dtype(c10::kLong));
  return {out,
          logsumexp,
          no_sequence_lengths,
          no_sequence_lengths,
          c10::SymInt(s.L),
          c10::SymInt(s.S),
          philox_seed,
          philox_offset,
          at::Tensor()};
}

// P = softmax(scores); dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(P * dP));
// dQ = scale dS K; dK = scale dS^T Q; the bias's gradient is dS summed to the bias's shape.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/, c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p,
    bool is_causal, const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/,
    std::optional<double> scale) {
  static const char* const kName =
      "aten::_scaled_dot_product_fused_attention_overrideable_backward";
  const at::Tensor* bias = attn_bias.defined() ? &attn_bias : nullptr;
  check_fused_inputs(kName, query, key, value, bias, dropout_p);
  const Shape s = shape_of(query, key, value);
  TORCH_CHECK(grad_out.sizes() == out.sizes(), kName, ": grad_out ", grad_out.sizes(), " and out ",
              out.sizes(), " differ in shape");
  TORCH_CHECK(logsumexp.numel() == s.n * s.L, kName, ": logsumexp has ", logsumexp.numel(),
              " elements, expected ", s.n * s.L);
  at::Tensor grad_q = at::empty_like(query);
  at::Tensor grad_k = at::empty_like(key);
  at::Tensor grad_v = at::empty_like(value);
  const bool bias_grad = bias != nullptr && grad_input_mask[3];
  at::Tensor grad_bias = bias_grad ? at::empty_like(attn_bias) : at::Tensor();
  const c10::Scalar scale_value(default_scale(query, scale));
  const c10::ScalarType compute = opmath_type(query.scalar_type());

  PreparedCall call(kName,
                    {&grad_out, &query, &key, &value, bias, &out, &logsumexp, &grad_q, &grad_k,
                     &grad_v, bias_grad ? &grad_bias : nullptr},
                    {&scale_value}, {is_causal, bias_grad, matmul_setting()});
  if (call.run()) return {grad_q, grad_k, grad_v, grad_bias};
  Program p(kName, &call);
  p.compile_as_graph();
  Builder& b = p.b();
  if (on_host(query, value, bias)) {
    const HostLayout layout(query, s);
    std::vector<Value> r = host_attention(
        b, /*backward=*/true, is_causal, layout.heads_second,
        {layout.read(p, grad_out, compute), layout.read(p, query, compute),
         layout.read(p, key, compute), layout.read(p, value, compute), layout.read(p, out, compute),
         b.reshape(p.read(logsumexp, c10::kFloat), layout.lse_dims(s.L)),
         p.scalar(scale_value, compute)},
        {layout.type(s.L, s.E), layout.type(s.S, s.E), layout.type(s.S, s.E)});
    p.write(grad_q, layout.result(b, r[0], s));
    p.write(grad_k, layout.result(b, r[1], s));
    p.write(grad_v, layout.result(b, r[2], s));
    p.run();
    return {grad_q, grad_k, grad_v, grad_bias};
  }
  Value q = flat(p, query, s.n, compute);
  Value k = flat(p, key, s.n, compute);
  Value x = scores(p, s, q, k, bias, is_causal, scale_value, compute);
  // The probabilities are recomputed as the forward computed them, not as exp(x - lse): lse is
  // rounded to float32 around the row maximum, which for large scores costs P more precision
  // than the math path's backward has.
  const Value probabilities = softmax_rows(b, x, s).probabilities;
  Value dout = flat(p, grad_out, s.n, compute);
  const hlo::ElementType e = probabilities.element();
  Value dv = b.dot_general(b.transpose(probabilities, {0, 2, 1}), dout, {0}, {0}, {2}, {1}, e);
  Value dp = b.dot_general(dout, b.transpose(flat(p, value, s.n, compute), {0, 2, 1}), {0}, {0},
                           {2}, {1}, e);
  Value row_dot = reduce_rows(b, b.binary("multiply", probabilities, dp), 0, hlo::Reduction::Add);
  Value ds = b.binary("multiply", probabilities, b.binary("subtract", dp, rows(b, row_dot, s)));
  Value scale_ds =
      b.binary("multiply", ds, b.broadcast_to(p.scalar(scale_value, compute), ds.dims()));
  Value dq = b.dot_general(scale_ds, k, {0}, {0}, {2}, {1}, e);
  Value dk = b.dot_general(b.transpose(scale_ds, {0, 2, 1}), q, {0}, {0}, {2}, {1}, e);
  p.write(grad_q, unflatten(b, dq, s));
  p.write(grad_k, unflatten(b, dk, s));
  p.write(grad_v, unflatten(b, dv, s));
  if (bias_grad) {
    // Sum dS over the dimensions the bias was broadcast along.
    const std::vector<int64_t> full_dims = s.scores();
    const int64_t lead = static_cast<int64_t>(full_dims.size()) - attn_bias.dim();
    std::vector<int64_t> summed;
    for (int64_t d = 0; d < static_cast<int64_t>(full_dims.size()); ++d) {
      if (d < lead || (attn_bias.size(d - lead) == 1 && full_dims[d] != 1)) summed.push_back(d);
    }
    Value g = b.reshape(ds, full_dims);
    if (!summed.empty()) g = b.reduce(g, b.constant(0, g.element()), hlo::Reduction::Add, summed);
    p.write(grad_bias, b.reshape(g, attn_bias.sizes().vec()));
  }
  p.run();
  return {grad_q, grad_k, grad_v, grad_bias};
}

}  // namespace tpu::aten

// PyTorch asks this stub which kernel F.scaled_dot_product_attention runs on a tpu tensor.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &tpu::aten::choose_attention_kernel)
}  // namespace at::native
