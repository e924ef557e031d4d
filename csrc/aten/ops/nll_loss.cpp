// The negative log-likelihood loss (nll_loss and nll_loss2d, forward and backward), on which
// cross_entropy is composed. Class scores are viewed as [rows, C] with the class axis last.
#include <ATen/core/Reduction.h>
#include <ATen/ops/empty.h>

#include <limits>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::Value;

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }
const at::Tensor* optional_tensor(const std::optional<at::Tensor>& t) {
  return defined(t) ? &*t : nullptr;
}

// The input's layout as [rows, C]: which axis holds the classes and how to move it last.
struct Layout {
  int64_t classes = 0;
  int64_t rows = 1;
  std::vector<int64_t> permutation;  // input axes with the class axis moved last
  std::vector<int64_t> permuted;     // the input's shape after that permutation
};

Layout layout_of(const at::Tensor& self) {
  Layout l;
  const int64_t class_axis = self.dim() == 1 ? 0 : 1;
  l.classes = self.size(class_axis);
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != class_axis) {
      l.permutation.push_back(d);
      l.permuted.push_back(self.size(d));
      l.rows *= self.size(d);
    }
  }
  l.permutation.push_back(class_axis);
  l.permuted.push_back(l.classes);
  return l;
}

void check_inputs(const at::Tensor& self, const at::Tensor& target,
                  const std::optional<at::Tensor>& weight, bool two_d) {
  if (two_d) {
    TORCH_CHECK(self.dim() == 4,
                "only batches of spatial inputs supported (4D tensors), but got "
                "input of size: ",
                self.sizes());
    TORCH_CHECK(target.dim() == 3,
                "only batches of spatial targets supported (3D tensors) but "
                "got targets of dimension: ",
                target.dim());
    TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) &&
                    self.size(3) == target.size(2),
                "input and target batch or spatial sizes don't match: target ", target.sizes(),
                ", input ", self.sizes());
  } else {
    TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
    TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
    const int64_t batch = self.dim() == 1 ? 1 : self.size(0);
    const int64_t target_batch = target.dim() == 0 ? 1 : target.size(0);
    TORCH_CHECK(batch == target_batch, "Expected input batch_size (", batch,
                ") to match target batch_size (", target_batch, ").");
  }
  TORCH_CHECK(target.scalar_type() == c10::kLong || target.scalar_type() == c10::kByte,
              "expected scalar type Long but found ", target.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"nll_loss\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  const int64_t classes = self.dim() == 1 ? self.size(0) : self.size(1);
  TORCH_CHECK(!defined(weight) || (weight->dim() == 1 && weight->numel() == classes),
              "weight tensor should be defined either for all ", classes,
              " classes or no classes but got weight tensor of shape: ", weight->sizes());
}

// The device cannot raise, so one small program finds the largest out-of-range target
// (ignore_index excepted), and the host reads it back: IndexError as on the CPU.
void check_targets(const at::Tensor& target, int64_t classes, int64_t ignore_index) {
  if (target.numel() == 0) return;
  at::Tensor worst = at::empty({}, target.options().dtype(c10::kLong));
  const double none = static_cast<double>(std::numeric_limits<int64_t>::min());
  static const char* const kName = "aten::nll_loss(target check)";
  const c10::Scalar ignore(ignore_index), count(classes);
  PreparedCall call(kName, {&target, &worst}, {&ignore, &count});
  if (!call.run()) {
    Program p(kName, &call);
    auto& b = p.b();
    Value t = p.read(target, c10::kLong);
    auto splat = [&](const Value& v) { return b.broadcast_to(v, t.dims()); };
    Value ignored = b.compare(Compare::EQ, t, splat(p.scalar(ignore, c10::kLong)));
    Value bad = b.binary("or", b.compare(Compare::LT, t, splat(b.constant(0, t.element()))),
                         b.compare(Compare::GE, t, splat(p.scalar(count, c10::kLong))));
    bad = b.binary("and", bad, b.unary("not", ignored));
    Value marked = b.select(bad, t, splat(b.constant(none, t.element())));
    std::vector<int64_t> all(t.rank());
    for (int64_t d = 0; d < t.rank(); ++d) all[d] = d;
    p.write(worst, b.reduce(marked, b.constant(none, t.element()), hlo::Reduction::Max, all));
    p.run();
  }
  check_later(worst, [](const at::Tensor& host) {
    const int64_t value = host.item<int64_t>();
    TORCH_CHECK_INDEX(value == std::numeric_limits<int64_t>::min(), "Target ", value,
                      " is out of bounds.");
  });
}

// Per-row pieces shared by forward and backward: the safe target index, the row mask
// (not ignored), and the weight of each row's target.
struct Rows {
  Value target;  // [rows] int64, clamped into [0, C)
  Value keep;    // [rows] pred
  Value weight;  // [rows] compute type, 0 where ignored
};

Rows rows_of(Program& p, const at::Tensor& target, const std::optional<at::Tensor>& weight,
             const Layout& l, const c10::Scalar& ignore_index, c10::ScalarType compute) {
  auto& b = p.b();
  Rows r;
  Value t = b.reshape(p.read(target, c10::kLong), {l.rows});
  r.keep = b.compare(Compare::NE, t, b.broadcast_to(p.scalar(ignore_index, c10::kLong), {l.rows}));
  r.target = b.binary(
      "minimum", b.binary("maximum", t, b.broadcast_to(b.constant(0, t.element()), {l.rows})),
      b.broadcast_to(b.constant(static_cast<double>(l.classes - 1), t.element()), {l.rows}));
  const hlo::ElementType e = element_type(compute);
  Value w = defined(weight)
                ? b.gather_1d(b.reshape(p.read(*weight, compute), {l.classes}), r.target)
                : b.broadcast_to(b.constant(1, e), {l.rows});
  r.weight = b.select(r.keep, w, b.broadcast_to(b.constant(0, e), {l.rows}));
  return r;
}

std::vector<int64_t> none_shape(const at::Tensor& self, const Layout& l) {
  if (self.dim() == 1) return {};
  return std::vector<int64_t>(l.permuted.begin(), l.permuted.end() - 1);
}

void lower_forward(const char* name, const at::Tensor& self, const at::Tensor& target,
                   const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                   const at::Tensor& output, const at::Tensor& total_weight) {
  const Layout l = layout_of(self);
  check_targets(target, l.classes, ignore_index);
  const c10::ScalarType compute = opmath_type(self.scalar_type());
  const c10::Scalar ignore(ignore_index);
  PreparedCall call(name, {&self, &target, optional_tensor(weight), &output, &total_weight},
                    {&ignore}, {reduction});
  if (call.run()) return;
  Program p(name, &call);
  auto& b = p.b();
  Rows r = rows_of(p, target, weight, l, ignore, compute);
  Value x = b.reshape(b.transpose(p.read(self, compute), l.permutation), {l.rows * l.classes});
  Value row_start = b.binary(
      "multiply", b.iota(hlo::TensorType{hlo::ElementType::S64, {l.rows}}, 0),
      b.broadcast_to(b.constant(static_cast<double>(l.classes), hlo::ElementType::S64), {l.rows}));
  Value picked = b.gather_1d(x, b.binary("add", row_start, r.target));
  Value losses = b.unary("negate", b.binary("multiply", picked, r.weight));
  const hlo::ElementType e = element_type(compute);
  Value total = b.reduce(r.weight, b.constant(0, e), hlo::Reduction::Add, {0});
  if (reduction == at::Reduction::None) {
    p.write(output, b.reshape(losses, output.sizes().vec()));
    p.write(total_weight, b.constant(0, e));
  } else {
    Value loss = b.reduce(losses, b.constant(0, e), hlo::Reduction::Add, {0});
    if (reduction == at::Reduction::Mean) loss = b.binary("divide", loss, total);
    p.write(output, loss);
    p.write(total_weight, total);
  }
  p.run();
}

std::tuple<at::Tensor, at::Tensor> forward(const char* name, const at::Tensor& self,
                                           const at::Tensor& target,
                                           const std::optional<at::Tensor>& weight,
                                           int64_t reduction, int64_t ignore_index, bool two_d) {
  check_inputs(self, target, weight, two_d);
  const Layout l = layout_of(self);
  at::Tensor output =
      at::empty(reduction == at::Reduction::None ? none_shape(self, l) : std::vector<int64_t>{},
                self.options());
  at::Tensor total_weight = at::empty({}, self.options());
  if (l.rows == 0) {
    // No rows to pick from (a gather needs one): the CPU's empty sum, and its 0/0 mean.
    total_weight.zero_();
    if (reduction == at::Reduction::Mean) {
      output.fill_(std::numeric_limits<double>::quiet_NaN());
    } else if (reduction == at::Reduction::Sum) {
      output.zero_();
    }
    return {output, total_weight};
  }
  lower_forward(name, self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor backward(const char* name, const at::Tensor& grad_output, const at::Tensor& self,
                    const at::Tensor& target, const std::optional<at::Tensor>& weight,
                    int64_t reduction, int64_t ignore_index, const at::Tensor& total_weight,
                    bool two_d) {
  check_inputs(self, target, weight, two_d);
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  if (self.numel() == 0) return grad_input;
  const Layout l = layout_of(self);
  const c10::ScalarType compute = opmath_type(self.scalar_type());
  const hlo::ElementType e = element_type(compute);
  const c10::Scalar ignore(ignore_index);
  PreparedCall call(
      name, {&grad_output, &self, &target, optional_tensor(weight), &total_weight, &grad_input},
      {&ignore}, {reduction});
  if (call.run()) return grad_input;
  Program p(name, &call);
  auto& b = p.b();
  Rows r = rows_of(p, target, weight, l, ignore, compute);
  Value g = p.read(grad_output, compute);
  Value scale = reduction == at::Reduction::None
                    ? b.reshape(g, {l.rows})
                    : b.broadcast_to(reduction == at::Reduction::Mean
                                         ? b.binary("divide", g, p.read(total_weight, compute))
                                         : g,
                                     {l.rows});
  Value per_row = b.unary("negate", b.binary("multiply", r.weight, scale));
  std::vector<int64_t> grid{l.rows, l.classes};
  Value classes = b.iota(hlo::TensorType{hlo::ElementType::S64, grid}, 1);
  Value hit = b.compare(Compare::EQ, classes, b.broadcast_in_dim(r.target, grid, {0}));
  Value grad =
      b.select(hit, b.broadcast_in_dim(per_row, grid, {0}), b.broadcast_to(b.constant(0, e), grid));
  std::vector<int64_t> inverse(l.permutation.size());
  for (size_t i = 0; i < l.permutation.size(); ++i) inverse[l.permutation[i]] = i;
  p.write(grad_input, b.transpose(b.reshape(grad, l.permuted), inverse));
  p.run();
  return grad_input;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self,
                                                    const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight,
                                                    int64_t reduction, int64_t ignore_index) {
  return forward("aten::nll_loss_forward", self, target, weight, reduction, ignore_index, false);
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(
    const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
    int64_t reduction, int64_t ignore_index, at::Tensor& output, at::Tensor& total_weight) {
  auto [o, t] = nll_loss_forward(self, target, weight, reduction, ignore_index);
  output.resize_(o.sizes());
  output.copy_(o);
  total_weight.resize_({});
  total_weight.copy_(t);
  return {output, total_weight};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& weight,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  return backward("aten::nll_loss_backward", grad_output, self, target, weight, reduction,
                  ignore_index, total_weight, false);
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self,
                                                      const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight,
                                                      int64_t reduction, int64_t ignore_index) {
  return forward("aten::nll_loss2d_forward", self, target, weight, reduction, ignore_index, true);
}

at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& weight,
                               int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  return backward("aten::nll_loss2d_backward", grad_output, self, target, weight, reduction,
                  ignore_index, total_weight, true);
}

}  // namespace tpu::aten
