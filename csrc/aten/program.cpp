#include "aten/program.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e4m3fnuz.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Float8_e5m2fnuz.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>

#include "aten/device.h"
#include "aten/device_errors.h"
#include "aten/dtype.h"
#include "aten/eager_mode.h"
#include "aten/storage.h"
#include "host_kernels/matmul.h"
#include "runtime/metrics.h"
#include "runtime/program_trace.h"
#include "runtime/runtime.h"
#include "runtime/strided.h"
#include "runtime/xla_cpu_shortcuts.h"

namespace tpu::aten {

namespace {

runtime::StridedView view_of(const at::Tensor& tensor) {
  return runtime::StridedView{tensor.sizes().vec(), tensor.strides().vec(),
                              tensor.storage_offset()};
}

// A complex32 view seen in its storage's f16 elements: one more dimension of 2 (real,
// imaginary), strides and offset doubled.
runtime::StridedView as_halves(hlo::Builder& b, runtime::StridedView view) {
  for (int64_t& stride : view.strides) stride *= 2;
  view.sizes.push_back(2);
  view.strides.push_back(1);
  view.offset *= 2;
  if (view.offset_operand) {
    view.offset_operand = b.binary("multiply", *view.offset_operand,
                                   b.constant(2, view.offset_operand->element()));
  }
  return view;
}

// c64 values from f16 (real, imaginary) pairs along the last dimension, and back.
hlo::Value complex_from_halves(hlo::Builder& b, const hlo::Value& pairs) {
  std::vector<int64_t> dims = pairs.dims();
  dims.pop_back();
  auto part = [&](int64_t index) {
    std::vector<int64_t> start(pairs.rank(), 0);
    std::vector<int64_t> limit = pairs.dims();
    start.back() = index;
    limit.back() = index + 1;
    std::vector<int64_t> unit(pairs.rank(), 1);
    return b.convert(b.reshape(b.slice(pairs, start, limit, unit), dims), hlo::ElementType::F32);
  };
  return b.make_complex(part(0), part(1));
}

hlo::Value halves_of_complex(hlo::Builder& b, const hlo::Value& values) {
  std::vector<int64_t> dims = values.dims();
  dims.push_back(1);
  auto part = [&](bool imaginary) {
    return b.reshape(b.convert(b.complex_parts(values, imaginary), hlo::ElementType::F16), dims);
  };
  return b.concatenate({part(false), part(true)}, static_cast<int64_t>(dims.size()) - 1);
}

}  // namespace

// Values outside the type's range wrap (integers) or become infinite (floats), as the
// CPU's casts do, instead of raising. A dtype computed in a wider type (element_type) gets
// its value rounded to the dtype, in the wider type's bytes; a value it cannot hold raises,
// as the CPU's fill does.
std::vector<unsigned char> scalar_bytes(const c10::Scalar& value, c10::ScalarType type) {
  std::vector<unsigned char> bytes(hlo::byte_size(element_type(type)));
  auto put = [&](auto v) { std::memcpy(bytes.data(), &v, sizeof v); };
  const bool integral_value = value.isIntegral(/*includeBool=*/true);
  const double real = value.isComplex()                      ? value.toComplexDouble().real()
                      : integral_value && !value.isBoolean() ? static_cast<double>(value.toLong())
                      : value.isBoolean()                    ? static_cast<double>(value.toBool())
                                                             : value.toDouble();
  // Integers keep all 64 bits (doubles would round above 2**53).
  const uint64_t bits = value.isBoolean()    ? static_cast<uint64_t>(value.toBool())
                        : value.isUnsigned() ? value.toUInt64()
                        : integral_value     ? static_cast<uint64_t>(value.toLong())
                                             : static_cast<uint64_t>(static_cast<int64_t>(real));
  switch (type) {
    case c10::kBool:
      put(static_cast<uint8_t>(value.isComplex() ? value.toComplexDouble() != 0.0 : real != 0.0));
      break;
    case c10::kChar: put(static_cast<int8_t>(bits)); break;
    case c10::kShort: put(static_cast<int16_t>(bits)); break;
    case c10::kInt: put(static_cast<int32_t>(bits)); break;
    case c10::kLong: put(static_cast<int64_t>(bits)); break;
    case c10::kByte: put(static_cast<uint8_t>(bits)); break;
    case c10::kUInt16: put(static_cast<uint16_t>(bits)); break;
    case c10::kUInt32: put(static_cast<uint32_t>(bits)); break;
    case c10::kUInt64: put(static_cast<uint64_t>(bits)); break;
    case c10::kHalf: put(c10::Half(static_cast<float>(real))); break;
    case c10::kBFloat16: put(c10::BFloat16(static_cast<float>(real))); break;
    case c10::kFloat: put(static_cast<float>(real)); break;
    case c10::kDouble: put(real); break;
    case c10::kComplexFloat: put(value.to<c10::complex<float>>()); break;
    case c10::kComplexDouble: put(value.to<c10::complex<double>>()); break;
    case c10::kFloat8_e4m3fn: put(static_cast<float>(value.to<c10::Float8_e4m3fn>())); break;
    case c10::kFloat8_e5m2: put(static_cast<float>(value.to<c10::Float8_e5m2>())); break;
    case c10::kFloat8_e4m3fnuz: put(static_cast<float>(value.to<c10::Float8_e4m3fnuz>())); break;
    case c10::kFloat8_e5m2fnuz: put(static_cast<float>(value.to<c10::Float8_e5m2fnuz>())); break;
    case c10::kComplexHalf: {
      const auto half = value.to<c10::complex<c10::Half>>();
      put(c10::complex<float>(static_cast<float>(half.real()), static_cast<float>(half.imag())));
      break;
    }
    default: TORCH_CHECK_TYPE(false, "the tpu device does not support dtype ", type);
  }
  return bytes;
}

namespace {

// Whether `buffer` (holding `value`) has a NaN or an infinity: a tiny program, awaited.
bool has_nan_or_inf(const pjrt::BufferPtr& buffer, const hlo::Value& value, int device) {
  hlo::Builder b;
  hlo::Value x = b.parameter(value.type);
  hlo::Value finite = b.op("is_finite", {x}, hlo::TensorType{hlo::ElementType::Pred, x.dims()});
  std::vector<int64_t> all(x.dims().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  hlo::Value every =
      b.reduce(finite, b.constant(1, hlo::ElementType::Pred), hlo::Reduction::And, all);
  runtime::Runtime& rt = runtime::Runtime::get();
  auto executable = rt.programs().get(b.module_text({every}));
  std::vector<pjrt::BufferPtr> outputs =
      executable->execute({buffer->get()}, rt.client().device(device));
  bool all_finite = true;
  outputs[0]->to_host(&all_finite, 1);
  return !all_finite;
}

}  // namespace

// Asked once per op: cached, as a process never switches plugins (Runtime::initialize).
bool on_xla_cpu() {
  static const bool cpu = runtime::Runtime::get().client().platform_name() == "cpu";
  return cpu;
}

bool taking_xla_cpu_shortcuts() {
  static const bool taking =
      runtime::xla_cpu_shortcuts(runtime::Runtime::get().client().platform_name());
  return taking;
}

// torch.set_float32_matmul_precision: "highest" (PyTorch's default) promises float32
// results, which a TPU gives only with HIGHEST (its DEFAULT is one bfloat16 pass).
static hlo::MatmulPrecision matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::MEDIUM: return hlo::MatmulPrecision::Default;
    case at::Float32MatmulPrecision::HIGH: return hlo::MatmulPrecision::High;
    default: return hlo::MatmulPrecision::Highest;
  }
}

Program::Program(const char* op_name, PreparedCall* prepared)
    : op_name_(op_name), prepared_(prepared) {
  // Lowerings for XLA:CPU's code generator (hlo::Builder::set_for_xla_cpu) are a speed
  // shortcut; its NaN-dropping min/max needs the fix on the CPU plugin in every mode.
  builder_.set_for_xla_cpu(taking_xla_cpu_shortcuts());
  builder_.set_nan_propagating_min_max(on_xla_cpu());
  builder_.set_host_matmul(host_kernels::host_matmul_enabled());
  builder_.set_matmul_precision(matmul_precision());
}

void Program::check_device(const at::Tensor& tensor) {
  int index = tensor.device().index();
  if (device_ < 0) device_ = index;
  TORCH_CHECK(index == device_,
              "Expected all tensors to be on the same device, but found at least two devices, "
              "tpu:",
              device_, " and tpu:", index, "!");
}

Program::StorageState& Program::state_of(const at::Tensor& tensor) {
  runtime::DeviceStorage* storage = device_storage(tensor.storage());
  TORCH_INTERNAL_ASSERT(storage != nullptr, "a non-empty tpu tensor has no device storage");
  for (StorageState& state : storages_) {
    if (state.storage == storage) return state;
  }
  storages_.push_back(StorageState{storage, tensor.storage(), hlo::Value{}, false, false});
  return storages_.back();
}

hlo::Value Program::storage_value(StorageState& state) {
  if (!state.has_value) {
    materialize(*state.storage);
    hlo::TensorType type{state.storage->element_type(), {state.storage->elements()}};
    state.value = builder_.parameter(type);
    state.has_value = true;
    operands_.push_back(Operand{static_cast<int>(&state - storages_.data()), {}, {}, {}, type});
    if (prepared_ != nullptr) {
      operands_.back().source = {OperandSource::Kind::Storage,
                                 prepared_->storage_slot(state.storage)};
    }
  }
  return state.value;
}

hlo::Value Program::read(const at::Tensor& tensor, std::optional<c10::ScalarType> as) {
  c10::ScalarType target = as.value_or(tensor.scalar_type());
  if (tensor.device().is_cpu()) {
    TORCH_CHECK(tensor.dim() == 0,
                "Expected all tensors to be on the same device, but found at least two devices, "
                "tpu:",
                device_ < 0 ? current_device() : device_, " and cpu!");
    if (prepared_ != nullptr) {
      pending_source_ = {OperandSource::Kind::CpuItem, prepared_->tensor_slot(tensor)};
    }
    return scalar(tensor.item(), target);
  }
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two devices, "
              "tpu and ",
              tensor.device(), "!");
  check_device(tensor);
  const c10::ScalarType dtype = tensor.scalar_type();
  hlo::ElementType type = element_type(dtype);
  hlo::Value value;
  if (tensor.numel() == 0) {
    value = builder_.broadcast_to(builder_.constant(0, type), tensor.sizes().vec());
  } else {
    runtime::StridedView view = with_offset_operand(tensor, view_of(tensor));
    hlo::ElementType stored = storage_element_type(dtype);
    hlo::Value elements = runtime::reinterpret(builder_, storage_value(state_of(tensor)), stored);
    if (dtype == c10::kComplexHalf) {
      value = complex_from_halves(
          builder_, runtime::read_strided(builder_, elements, as_halves(builder_, view)));
    } else {
      value = runtime::read_strided(builder_, elements, view);
      if (stored != type) {  // an 8-bit float's bytes
        value = builder_.convert(
            builder_.bitcast_convert(value, hlo::TensorType{float8_type(dtype), value.dims()}),
            type);
      }
    }
  }
  return builder_.convert(value, element_type(target));
}

namespace {
// A copy (not a pointer into the recorder's state), so nothing dangles if a recording
// ends without finish() or abandon().
thread_local bool recording_compiled_graph = false;
thread_local std::vector<runtime::DeviceStorage*> compiled_graph_inputs;

bool computed_by_compiled_graph(const at::Tensor& tensor) {
  if (!recording_compiled_graph) return false;
  runtime::DeviceStorage* storage = device_storage(tensor.storage());
  return storage != nullptr && storage->pending_graph() != nullptr &&
         std::find(compiled_graph_inputs.begin(), compiled_graph_inputs.end(), storage) ==
             compiled_graph_inputs.end();
}
}  // namespace

void set_compiled_graph_inputs(const std::vector<runtime::DeviceStorage*>* inputs) {
  recording_compiled_graph = inputs != nullptr;
  compiled_graph_inputs.assign(inputs != nullptr ? inputs->begin() : compiled_graph_inputs.end(),
                               inputs != nullptr ? inputs->end() : compiled_graph_inputs.end());
}

runtime::StridedView Program::with_offset_operand(const at::Tensor& tensor,
                                                  runtime::StridedView view) {
  // Offset 0 (most tensors) stays a constant; any other offset is passed at run time, so
  // x[i] for every i, a KV-cache write per step, a column x[:, j] ... share one program.
  // A compiled graph's own intermediates keep theirs (see set_compiled_graph_inputs); a
  // prepared call may not be kept for them, as its signature leaves offsets out.
  if (view.offset != 0 && computed_by_compiled_graph(tensor)) {
    if (prepared_ != nullptr) prepared_->forgo();
    return view;
  }
  if (view.offset != 0) {
    if (prepared_ != nullptr) {
      pending_source_ = {OperandSource::Kind::Offset, prepared_->tensor_slot(tensor)};
    }
    view.offset_operand = scalar(view.offset, c10::kLong);
  }
  return view;
}

hlo::Value Program::scalar(const c10::Scalar& value, c10::ScalarType type) {
  hlo::TensorType parameter_type{element_type(type), {}};
  hlo::Value parameter = builder_.parameter(parameter_type);
  operands_.push_back(Operand{-1, scalar_bytes(value, type), type, {}, parameter_type});
  if (prepared_ != nullptr) {
    OperandSource source = pending_source_;
    if (source.kind == OperandSource::Kind::Unknown) {
      source = {OperandSource::Kind::Scalar, prepared_->scalar_slot(value)};
    }
    source.type = type;
    operands_.back().source = source;
    pending_source_ = {};
  }
  return parameter;
}

hlo::Value Program::key(const std::array<uint64_t, 2>& key) {
  hlo::TensorType parameter_type{hlo::ElementType::U64, {2}};
  hlo::Value parameter = builder_.parameter(parameter_type);
  std::vector<unsigned char> bytes(sizeof key);
  std::memcpy(bytes.data(), key.data(), sizeof key);
  operands_.push_back(Operand{-1, std::move(bytes), c10::kUInt64, {2}, parameter_type, true});
  return parameter;
}

void Program::write(const at::Tensor& out, const hlo::Value& value) {
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two devices, "
              "tpu and ",
              out.device(), "!");
  check_device(out);
  if (out.numel() == 0) return;
  const c10::ScalarType dtype = out.scalar_type();
  hlo::ElementType type = element_type(dtype);
  hlo::Value shaped = builder_.broadcast_to(builder_.convert(value, type), out.sizes().vec());
  // The values as the storage holds them (see storage_element_type).
  hlo::ElementType stored_type = storage_element_type(dtype);
  hlo::Value stored = shaped;
  if (dtype == c10::kComplexHalf) {
    stored = halves_of_complex(builder_, shaped);
  } else if (stored_type != type) {
    stored = builder_.bitcast_convert(builder_.convert(shaped, float8_type(dtype)),
                                      hlo::TensorType{stored_type, shaped.dims()});
  }
  StorageState& state = state_of(out);
  runtime::StridedView view = view_of(out);
  if (dtype == c10::kComplexHalf) view = as_halves(builder_, view);
  size_t element_bytes = hlo::byte_size(stored_type);
  int64_t elements = static_cast<int64_t>(state.storage->nbytes() / element_bytes);
  if (state.storage->nbytes() % element_bytes == 0 && view.covers_exactly(elements)) {
    // Only XLA:CPU gets the shape (see DeferredGraph::record): it checks only the byte
    // size of a parameter's buffer, and on a TPU an N-d result would be a relayout.
    state.value = runtime::dense_storage(builder_, view, stored,
                                         taking_xla_cpu_shortcuts() ? &state.shape : nullptr);
  } else {
    state.shape.clear();
    hlo::Value base = runtime::reinterpret(builder_, storage_value(state), stored_type);
    runtime::StridedView placed = with_offset_operand(out, view_of(out));
    if (dtype == c10::kComplexHalf) placed = as_halves(builder_, placed);
    state.value = runtime::write_strided(builder_, base, placed, stored);
  }
  state.has_value = true;
  state.written = true;
}

void Program::run() {
  translating_out_of_memory(device_, [this] { run_now(); });
}

namespace {
bool fuses_collectives() { return eager_mode() == EagerMode::DeferAndFuse && spmd_safe(); }
}  // namespace

int64_t collective_channel(int device, const std::string& compile_options) {
  if (!fuses_collectives()) return 1;
  runtime::DeferredGraph& graph = runtime::Runtime::get().deferred_graph(device);
  if (graph.holds_other_collectives(compile_options)) graph.flush();
  return graph.next_channel();
}

void Program::run_collective(const std::string& compile_options, int launch_id) {
  if (fuses_collectives() && device_ >= 0) {
    runtime::Runtime::get().deferred_graph(device_).join_collective(compile_options, launch_id);
    run();
    return;
  }
  compile_options_ = &compile_options;
  launch_id_ = launch_id;
  if (device_ >= 0) runtime::Runtime::get().deferred_graph(device_).flush();
  run();
  compile_options_ = nullptr;
}

void Program::run_now() {
  std::vector<hlo::Value> results;
  std::vector<StorageState*> written;
  for (StorageState& state : storages_) {
    if (!state.written) continue;
    results.push_back(state.value);
    written.push_back(&state);
  }
  if (results.empty()) return;
  if (eager_mode() == EagerMode::DeferAndFuse && compile_options_ == nullptr) {
    run_deferred(results, written);
    return;
  }
  runtime::Runtime& rt = runtime::Runtime::get();
  size_t bytes = 0;
  for (const StorageState& state : storages_) bytes += state.storage->nbytes();
  for (const Operand& operand : operands_) bytes += operand.bytes.size();
  const runtime::ProgramKind kind = compile_as_graph_ ? runtime::ProgramKind::Graph
                                    : bytes <= runtime::kQuickOpMaxBytes
                                        ? runtime::ProgramKind::QuickOp
                                        : runtime::ProgramKind::Op;
  std::string text = builder_.module_text(results);
  // Programs are cached by their text: one compiled with the graph options is kept apart
  // from the same text compiled as a one-op program (by an earlier version, say).
  if (compile_as_graph_) text += "// compiled as a graph\n";
  auto executable = compile_options_ == nullptr
                        ? rt.programs().get(text, op_name_, kind)
                        : rt.programs().get(text, op_name_, *compile_options_);

  std::vector<pjrt::BufferPtr> inputs;
  inputs.reserve(operands_.size());
  for (const Operand& operand : operands_) {
    inputs.push_back(operand.storage >= 0
                         ? storages_[operand.storage].storage->buffer()
                         : upload_operand(operand.bytes, operand.type, operand.dims, device_));
  }
  std::vector<pjrt::BufferPtr> outputs =
      launch_op(*executable, std::move(inputs), device_, op_name_, launch_id_, bytes);
  runtime::metrics().count_execution();
  runtime::metrics().count_native(op_name_);
  for (size_t i = 0; i < written.size(); ++i) {
    written[i]->storage->set_buffer(outputs[i], results[i].element());
  }
  if (prepared_ != nullptr && compile_options_ == nullptr && eager_mode() == EagerMode::Strict) {
    prepare(std::move(executable), written, results);
  }
  if (eager_mode() == EagerMode::Debug) {
    await_outputs(outputs, results);
  } else {
    rt.track(outputs);
  }
}

pjrt::BufferPtr upload_operand(const std::vector<unsigned char>& bytes, c10::ScalarType type,
                               const std::vector<int64_t>& dims, int device) {
  return runtime::Runtime::get().constants().get(bytes, buffer_type(element_type(type)), dims,
                                                 device);
}

std::vector<pjrt::BufferPtr> launch_op(const pjrt::Executable& executable,
                                       std::vector<pjrt::BufferPtr> inputs, int device,
                                       const char* op, int launch_id, size_t bytes) {
  runtime::Runtime& rt = runtime::Runtime::get();
  std::vector<PJRT_Buffer*> arguments;
  arguments.reserve(inputs.size());
  for (const pjrt::BufferPtr& input : inputs) arguments.push_back(input->get());
  runtime::ProfiledRun profiled(op, device);  // torch.profiler: the op's device time
  const pjrt::Executable* pinned = executable.pinned_for(device);
  std::vector<pjrt::BufferPtr> outputs =
      pinned != nullptr ? pinned->execute(arguments, nullptr, launch_id)
                        : executable.execute(arguments, rt.client().device(device), launch_id);
  profiled.done(outputs);
  rt.retire(std::move(inputs), outputs.front(), bytes);
  rt.programs().note_run(executable, device);
  return outputs;
}

std::vector<PreparedCall::Operand> Program::prepared_operands() const {
  std::vector<PreparedCall::Operand> operands;
  operands.reserve(operands_.size());
  for (const Operand& operand : operands_)
    operands.push_back({operand.source, operand.dims, operand.parameter});
  return operands;
}

std::vector<PreparedCall::Output> Program::prepared_outputs(
    const std::vector<StorageState*>& written, const std::vector<hlo::Value>& results) const {
  std::vector<PreparedCall::Output> outputs;
  for (size_t i = 0; i < written.size(); ++i) {
    outputs.push_back(
        {prepared_->storage_slot(written[i]->storage), static_cast<int>(results[i].element())});
  }
  return outputs;
}

void Program::prepare(std::shared_ptr<pjrt::Executable> executable,
                      const std::vector<StorageState*>& written,
                      const std::vector<hlo::Value>& results) {
  prepared_->prepare(std::move(executable), prepared_operands(),
                     prepared_outputs(written, results));
}

void Program::run_deferred(const std::vector<hlo::Value>& results,
                           const std::vector<StorageState*>& written) {
  std::string function = builder_.function_text("private @op", results);
  std::vector<std::vector<int64_t>> shapes;
  for (const StorageState* state : written) shapes.push_back(state->shape);
  if (prepared_ != nullptr) {
    std::vector<hlo::TensorType> types;
    for (const hlo::Value& result : results) types.push_back(result.type);
    prepared_->prepare_deferred(function, builder_.callees(), prepared_operands(),
                                prepared_outputs(written, results), std::move(types), shapes);
  }
  std::vector<runtime::DeferredGraph::Argument> arguments;
  for (Operand& operand : operands_) {
    runtime::DeviceStorage* storage =
        operand.storage >= 0 ? storages_[operand.storage].storage : nullptr;
    arguments.push_back({storage, std::move(operand.bytes), operand.parameter, operand.random_key});
  }
  std::vector<std::pair<runtime::DeviceStorage*, hlo::TensorType>> outputs;
  for (size_t i = 0; i < written.size(); ++i) {
    outputs.emplace_back(written[i]->storage, results[i].type);
  }
  runtime::DeferredGraph& graph = runtime::Runtime::get().deferred_graph(device_);
  int64_t pending = graph.record(function, arguments, outputs, builder_.callees(), shapes);
  runtime::metrics().count_native(op_name_);
  if (pending >= defer_max_ops()) graph.flush();
}

void Program::await_outputs(const std::vector<pjrt::BufferPtr>& outputs,
                            const std::vector<hlo::Value>& results) const {
  for (const pjrt::BufferPtr& output : outputs) {
    try {
      output->ready_event()->await();
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "tpu operator ", op_name_, " failed: ", e.what());
    }
  }
  if (!debug_nans()) return;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!hlo::is_float(results[i].element())) continue;
    TORCH_CHECK(!has_nan_or_inf(outputs[i], results[i], device_), "tpu operator ", op_name_,
                " produced a NaN or infinity (TORCH_TPU_DEBUG_NANS=1)");
  }
}

void check_later(const at::Tensor& flags, std::function<void(const at::Tensor& host)> check) {
  if (eager_mode() != EagerMode::DeferAndFuse) {
    check(flags.cpu());
    return;
  }
  TORCH_INTERNAL_ASSERT(flags.is_contiguous() && flags.storage_offset() == 0);
  at::Tensor host = at::empty(flags.sizes(), flags.options().device(c10::kCPU));
  runtime::DeviceStorage* storage = device_storage(flags.storage());
  runtime::Runtime::get()
      .deferred_graph(flags.device().index())
      .check(storage, [host, check = std::move(check)](const std::vector<unsigned char>& bytes) {
        std::memcpy(host.data_ptr(), bytes.data(), std::min(bytes.size(), host.nbytes()));
        check(host);
      });
}

void materialize(runtime::DeviceStorage& storage) {
  if (storage.has_buffer()) return;
  std::vector<unsigned char> zeros(storage.nbytes(), 0);
  storage.set_buffer(runtime::Runtime::get().client().buffer_from_host(
                         zeros.data(), PJRT_Buffer_Type_U8,
                         {static_cast<int64_t>(storage.nbytes())}, storage.device()),
                     hlo::ElementType::U8);
  runtime::metrics().count_host_to_device();
}

void copy_storage_prefix(runtime::DeviceStorage& src, runtime::DeviceStorage& dst) {
  materialize(src);
  hlo::Builder b;
  hlo::Value source = b.parameter(hlo::TensorType{src.element_type(), {src.elements()}});
  hlo::Value bytes = runtime::reinterpret(b, source, hlo::ElementType::U8);
  int64_t have = static_cast<int64_t>(src.nbytes());
  int64_t want = static_cast<int64_t>(dst.nbytes());
  if (want <= have) {
    bytes = b.slice(bytes, {0}, {want}, {1});
  } else {
    bytes = b.pad(bytes, b.constant(0, hlo::ElementType::U8), {0}, {want - have}, {0});
  }
  runtime::Runtime& rt = runtime::Runtime::get();
  auto executable = rt.programs().get(b.module_text({bytes}));
  std::vector<pjrt::BufferPtr> outputs =
      executable->execute({src.buffer()->get()}, rt.client().device(src.device()));
  runtime::metrics().count_execution();
  dst.set_buffer(outputs[0], hlo::ElementType::U8);
}

}  // namespace tpu::aten
