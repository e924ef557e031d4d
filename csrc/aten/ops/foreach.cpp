// The _foreach_* ops (what torch.optim uses with foreach=True, its default on tpu).
//
// The elementwise ones an optimizer step calls (add, sub, mul, div with a Scalar, a list of
// Scalars or a second list; lerp, addcmul, addcdiv, sqrt, zero_) run as one program over the
// whole list, where PyTorch's reference kernels run one op per tensor: in strict mode one
// launch instead of one per parameter, in defer_and_fuse one recorded op, and either way one
// signature built in C++ instead of a dispatcher round trip per tensor. Each index computes
// exactly what the per-tensor op computes (the same dtypes, scalar roundings and formulas).
//
// Lists that program does not serve (mixed dtypes or devices within an index, integer or
// complex tensors, empty tensors, lists that alias one another) and every other _foreach_ op
// run PyTorch's reference kernels: loops over the tensors calling the per-tensor ATen ops,
// which then dispatch to the tpu kernels. Registered for every _foreach_ operator the
// dispatcher knows, so new ones need no code here.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Value;

void run_reference_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/,
                          torch::jit::Stack* stack) {
  // The CPU entries of the _foreach_ ops are the device-agnostic loops over
  // per-tensor ops (the CUDA ones are fused kernels).
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

enum class Kind { Add, Sub, Mul, Div, Lerp, Addcmul, Addcdiv, Sqrt, Zero };

const std::unordered_map<std::string, Kind>& kinds() {
  static const std::unordered_map<std::string, Kind> table{
      {"add", Kind::Add},         {"sub", Kind::Sub},   {"mul", Kind::Mul},
      {"div", Kind::Div},         {"lerp", Kind::Lerp}, {"addcmul", Kind::Addcmul},
      {"addcdiv", Kind::Addcdiv}, {"sqrt", Kind::Sqrt}, {"zero", Kind::Zero}};
  return table;
}

// One native _foreach_ overload: what it computes and its name as a PreparedCall key (the
// map below holds it, so the pointer stays valid).
struct Spec {
  Kind kind;
  bool in_place;
  std::string name;
};

std::unordered_map<c10::OperatorName, Spec>& specs() {
  static std::unordered_map<c10::OperatorName, Spec> table;
  return table;
}

// The overloads served natively: every in-place and functional overload of the kinds above
// whose arguments are tensor lists, Scalars and Scalar lists (not the .Tensor ones, whose
// scalar is a tensor, nor .out).
std::optional<Spec> native_spec(const c10::FunctionSchema& schema) {
  const std::string& full = schema.name();  // aten::_foreach_add_
  std::string base = full.substr(std::string("aten::_foreach_").size());
  const std::string& overload = schema.overload_name();
  // Not the .Tensor overloads (their scalar is a tensor) nor the out= ones (.Scalar_out, ...).
  if (overload == "Tensor" || overload.find("out") != std::string::npos) return std::nullopt;
  const bool in_place = !base.empty() && base.back() == '_';
  if (!in_place && schema.returns().empty()) return std::nullopt;
  if (in_place) base.pop_back();
  auto found = kinds().find(base);
  if (found == kinds().end()) return std::nullopt;
  if (found->second == Kind::Zero && !in_place) return std::nullopt;
  for (const c10::Argument& argument : schema.arguments()) {
    const c10::TypePtr& type = argument.type();
    const bool tensors = type->isSubtypeOf(*c10::ListType::ofTensors());
    const bool scalar = type->kind() == c10::NumberType::Kind;
    const bool scalars = type->kind() == c10::ListType::Kind &&
                         type->containedType(0)->kind() == c10::NumberType::Kind;
    if (!tensors && !scalar && !scalars) return std::nullopt;
  }
  std::string name = full;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  return Spec{found->second, in_place, name};
}

// The arguments of one call, taken from the boxed stack.
struct Call {
  std::vector<std::vector<at::Tensor>> lists;  // self first
  std::vector<c10::Scalar> scalars;            // one (shared) or one per index; may be empty
  bool scalar_list = false;                    // scalars came as a Scalar[] (one per index)
  std::optional<c10::Scalar> alpha;
};

Call parse(const c10::FunctionSchema& schema, const torch::jit::Stack& stack) {
  Call call;
  const auto& arguments = schema.arguments();
  const size_t first = stack.size() - arguments.size();
  for (size_t a = 0; a < arguments.size(); ++a) {
    const c10::IValue& value = stack[first + a];
    if (value.isTensorList()) {
      call.lists.push_back(value.toTensorVector());
    } else if (value.isList()) {
      call.scalar_list = true;
      for (const c10::IValue& item : value.toListRef()) call.scalars.push_back(item.toScalar());
    } else if (arguments[a].name() == "alpha") {
      call.alpha = value.toScalar();
    } else {
      call.scalars.push_back(value.toScalar());
    }
  }
  return call;
}

bool floating(c10::ScalarType type) {
  return type == c10::kFloat || type == c10::kDouble || type == c10::kBFloat16 ||
         type == c10::kHalf;
}

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides();
}

// Whether one program computes what the per-tensor loop would: every index's tensors are
// dense floating tpu tensors of one dtype and shape on one device, and no tensor written reads
// another index's result (the loop would see it updated; one program reads the old values).
bool applies(const Spec& spec, const Call& call) {
  const std::vector<at::Tensor>& self = call.lists.front();
  if (self.empty()) return false;
  for (const auto& list : call.lists) {
    if (list.size() != self.size()) return false;
  }
  // A Scalar list of another length is the loop's error to raise (even of length 1).
  if (call.scalar_list && call.scalars.size() != self.size()) return false;
  // The per-tensor ops' argument errors (sub of a bool, a bool alpha) are the loop's to raise.
  for (const c10::Scalar& s : call.scalars) {
    if (s.isComplex() || (spec.kind == Kind::Sub && s.isBoolean())) return false;
  }
  if (call.alpha.has_value() && (call.alpha->isComplex() || call.alpha->isBoolean())) return false;
  const c10::Device device = self.front().defined() ? self.front().device() : c10::Device("cpu");
  if (device.type() != c10::DeviceType::PrivateUse1) return false;
  std::unordered_map<const void*, size_t> written;  // storage -> index of the self writing it
  for (size_t i = 0; i < self.size(); ++i) {
    for (const auto& list : call.lists) {
      const at::Tensor& t = list[i];
      if (!t.defined() || t.device() != device || t.scalar_type() != self[i].scalar_type() ||
          t.sizes() != self[i].sizes() || t.numel() == 0 || t.is_conj() || t.is_neg()) {
        return false;
      }
    }
    if (!floating(self[i].scalar_type())) return false;
    // An expanded result (several elements in one place) is the per-tensor op's error.
    if (spec.in_place && at::has_internal_overlap(self[i]) == at::MemOverlap::Yes) return false;
    if (spec.in_place && !written.emplace(self[i].storage().data_ptr().get(), i).second) {
      return false;  // two results in one storage
    }
  }
  if (!spec.in_place) return true;
  for (size_t k = 1; k < call.lists.size(); ++k) {
    for (size_t i = 0; i < self.size(); ++i) {
      const at::Tensor& t = call.lists[k][i];
      auto found = written.find(t.storage().data_ptr().get());
      if (found != written.end() && (found->second != i || !same_view(t, self[i]))) return false;
    }
  }
  return true;
}

Value splat(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}

// The per-tensor op's math on one index: `x` are the lists' values in the compute type,
// `scalar` the index's Scalar operand (already converted as that op converts it), `alpha`
// likewise (absent when it is 1).
Value compute(Kind kind, Builder& b, const std::vector<Value>& x,
              const std::optional<Value>& scalar, const std::optional<Value>& alpha) {
  auto second = [&] {
    if (x.size() > 1) return alpha.has_value() ? b.binary("multiply", x[1], *alpha) : x[1];
    return *scalar;
  };
  switch (kind) {
    case Kind::Add: return b.binary("add", x[0], second());
    case Kind::Sub: return b.binary("subtract", x[0], second());
    case Kind::Mul: return b.binary("multiply", x[0], second());
    case Kind::Div: return b.binary("divide", x[0], second());
    case Kind::Lerp: return lerp(b, x[0], x[1], x.size() > 2 ? x[2] : *scalar);
    case Kind::Addcmul:
    case Kind::Addcdiv: {
      Value product = b.binary(kind == Kind::Addcdiv ? "divide" : "multiply", x[1], x[2]);
      Value value = scalar.has_value() ? *scalar : splat(b, 1, product);
      return b.binary("add", x[0], b.binary("multiply", value, product));
    }
    case Kind::Sqrt: return b.unary("sqrt", x[0]);
    case Kind::Zero: break;  // written without reading its operands (lower_chunk)
  }
  return x[0];
}

// At most this many indices per program: a model with thousands of parameters gets several
// programs of bounded size rather than one whose compile grows with the model.
constexpr size_t kChunk = 128;

// Indices [begin, end) of the call as one program writing `outputs`.
void lower_chunk(const Spec& spec, const Call& call, const std::vector<at::Tensor>& outputs,
                 size_t begin, size_t end) {
  const size_t n = end - begin;
  const bool per_index_scalar = call.scalar_list;
  std::vector<const at::Tensor*> tensors;
  tensors.reserve(n * (call.lists.size() + 1));
  for (const auto& list : call.lists) {
    for (size_t i = begin; i < end; ++i) tensors.push_back(&list[i]);
  }
  if (!spec.in_place) {
    for (size_t i = begin; i < end; ++i) tensors.push_back(&outputs[i]);
  }
  std::vector<const c10::Scalar*> scalars;
  if (per_index_scalar) {
    for (size_t i = begin; i < end; ++i) scalars.push_back(&call.scalars[i]);
  } else if (!call.scalars.empty()) {
    scalars.push_back(&call.scalars.front());
  }
  const bool alpha_is_one =
      !call.alpha.has_value() || (call.alpha->isIntegral(true) && call.alpha->to<int64_t>() == 1);
  if (!alpha_is_one) scalars.push_back(&*call.alpha);
  PreparedCall prepared(spec.name.c_str(), tensors, scalars,
                        {static_cast<int64_t>(call.lists.size()), per_index_scalar, alpha_is_one,
                         static_cast<int64_t>(call.scalars.empty())});
  if (prepared.run()) return;
  Program p(spec.name.c_str(), &prepared);
  Builder& b = p.b();
  for (size_t i = begin; i < end; ++i) {
    const c10::ScalarType type = call.lists.front()[i].scalar_type();
    const c10::ScalarType math = opmath_type(type);
    const std::vector<int64_t> shape = call.lists.front()[i].sizes().vec();
    if (spec.kind == Kind::Zero) {  // writes only: reading self would make it an operand
      p.write(outputs[i], b.broadcast_to(b.constant(0, element_type(type)), shape));
      continue;
    }
    std::vector<Value> x;
    for (const auto& list : call.lists) x.push_back(p.read(list[i], math));
    // add and sub round a Scalar (and alpha) to the tensor's dtype first, as their CPU
    // kernels do; the other ops take it at the compute precision.
    const bool rounds = spec.kind == Kind::Add || spec.kind == Kind::Sub;
    auto operand = [&](const c10::Scalar& s) {
      return b.broadcast_to(b.convert(p.scalar(s, rounds ? type : math), element_type(math)),
                            shape);
    };
    std::optional<Value> scalar, alpha;
    if (!call.scalars.empty()) scalar = operand(call.scalars[per_index_scalar ? i : 0]);
    if (!alpha_is_one) alpha = operand(*call.alpha);
    p.write(outputs[i], compute(spec.kind, b, x, scalar, alpha));
  }
  p.run();
}

void run_native_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                       torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  auto found = specs().find(op.operator_name());
  if (found == specs().end()) return run_reference_kernel(op, keys, stack);
  const Spec& spec = found->second;
  Call call = parse(schema, *stack);
  if (!applies(spec, call)) return run_reference_kernel(op, keys, stack);
  const std::vector<at::Tensor>& self = call.lists.front();
  std::vector<at::Tensor> outputs;
  if (spec.in_place) {
    outputs = self;
  } else {
    outputs.reserve(self.size());
    for (const at::Tensor& t : self) outputs.push_back(at::empty_like(t));
  }
  for (size_t begin = 0; begin < self.size(); begin += kChunk) {
    lower_chunk(spec, call, outputs, begin, std::min(self.size(), begin + kChunk));
  }
  torch::jit::drop(*stack, schema.arguments().size());
  if (!spec.in_place) torch::jit::push(*stack, c10::IValue(outputs));
}

}  // namespace

void register_foreach_kernels() {
  static std::unique_ptr<torch::Library> library;
  if (library != nullptr) return;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                             c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::_foreach_", 0) != 0) continue;
    std::string qualified = name.name.substr(6);  // drop "aten::"
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    std::optional<Spec> spec =
        handle.has_value() && handle->hasSchema() ? native_spec(handle->schema()) : std::nullopt;
    if (spec.has_value()) {
      specs().emplace(name, *spec);
      library->impl(qualified.c_str(),
                    torch::CppFunction::makeFromBoxedFunction<&run_native_kernel>());
    } else {
      library->impl(qualified.c_str(),
                    torch::CppFunction::makeFromBoxedFunction<&run_reference_kernel>());
    }
  }
}

}  // namespace tpu::aten
