#include "distributed/tpu_backend.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <sstream>

#include "distributed/work.h"

namespace tpu::distributed {

using c10d::Work;
// Collectives write tensor data, as NCCL writes device memory: no autograd, no
// version bumps (a pipeline's receive buffer may already be a leaf that requires grad).
using NoAutograd = at::AutoDispatchBelowADInplaceOrView;
using WorkList = std::vector<at::Tensor>;

namespace {

const char* op_name(int64_t kind) {
  static const char* const names[] = {"broadcast",  "all_reduce",     "reduce",
                                      "all_gather", "reduce_scatter", "all_to_all",
                                      "gather",     "scatter",        "barrier"};
  return kind >= 0 && kind < 9 ? names[kind] : "unknown collective";
}

enum Kind : int64_t {
  kBroadcast,
  kAllReduce,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kBarrier
};

bool is_bitwise(const c10d::ReduceOp& op) {
  return op.op_ == c10d::ReduceOp::BAND || op.op_ == c10d::ReduceOp::BOR ||
         op.op_ == c10d::ReduceOp::BXOR;
}

void check_tensor(const char* op, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), op, ": got an undefined tensor");
  TORCH_CHECK_VALUE(t.layout() == c10::kStrided, op,
                    ": only dense (strided) tensors are supported, got ", t.layout());
  TORCH_CHECK_VALUE(t.is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1, op,
                    ": tensors must be on tpu or cpu, got one on ", t.device());
}

// Every tensor of one call must be on one device and, where the op needs it, one dtype.
void check_same(const char* op, const at::Tensor& first, const WorkList& others,
                bool same_dtype = true) {
  check_tensor(op, first);
  for (const at::Tensor& t : others) {
    check_tensor(op, t);
    TORCH_CHECK_VALUE(t.device() == first.device(), op, ": all tensors must be on one device, got ",
                      first.device(), " and ", t.device());
    TORCH_CHECK_TYPE(!same_dtype || t.scalar_type() == first.scalar_type(), op,
                     ": all tensors must have one dtype, got ", first.scalar_type(), " and ",
                     t.scalar_type());
  }
}

void check_reduction(const char* op, const at::Tensor& t, const c10d::ReduceOp& reduce) {
  at::ScalarType dtype = t.scalar_type();
  TORCH_CHECK_VALUE(!is_bitwise(reduce) || at::isIntegralType(dtype, /*includeBool=*/true), op,
                    ": bitwise reductions (BAND, BOR, BXOR) need integer or bool tensors, got ",
                    dtype);
  bool complex_ok = reduce.op_ == c10d::ReduceOp::SUM || reduce.op_ == c10d::ReduceOp::AVG ||
                    reduce.op_ == c10d::ReduceOp::PREMUL_SUM;
  TORCH_CHECK_VALUE(!at::isComplexType(dtype) || complex_ok, op,
                    ": complex tensors can only be reduced with SUM or AVG");
  TORCH_CHECK_VALUE(reduce.op_ != c10d::ReduceOp::AVG || dtype != at::kBool, op,
                    ": ReduceOp.AVG is not defined for bool tensors");
  TORCH_CHECK_VALUE(reduce.op_ != c10d::ReduceOp::UNUSED, op, ": invalid ReduceOp");
}

void check_root(const char* op, int root, int size) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, op, ": root rank ", root,
                    " is not in the group (size ", size, ")");
}

void check_peer(const char* op, int peer, int rank, int size) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size, op, ": peer rank ", peer,
                    " is not in the group (size ", size, ")");
  TORCH_CHECK_VALUE(peer != rank, op, ": rank ", rank, " cannot ", op, " to itself");
}

// Even splits when none are given; otherwise checks they add up to the rows.
std::vector<int64_t> rows_split(const char* what, const std::vector<int64_t>& given,
                                const at::Tensor& t, int size) {
  int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (given.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "all_to_all_single: the ", what, " tensor's ", rows,
                      " rows do not split evenly over ", size, " ranks; pass split sizes");
    return std::vector<int64_t>(size, rows / size);
  }
  TORCH_CHECK_VALUE(static_cast<int>(given.size()) == size, "all_to_all_single: ", what,
                    " split sizes has ", given.size(), " entries, expected one per rank (", size,
                    ")");
  int64_t total = 0;
  for (int64_t s : given) {
    TORCH_CHECK_VALUE(s >= 0, "all_to_all_single: negative ", what, " split size ", s);
    total += s;
  }
  TORCH_CHECK_VALUE(total == rows, "all_to_all_single: ", what, " split sizes add up to ", total,
                    " but the tensor has ", rows, " rows");
  return given;
}

std::vector<int64_t> times(std::vector<int64_t> rows, int64_t row_elements) {
  for (int64_t& r : rows) r *= row_elements;
  return rows;
}

int64_t row_elements(const at::Tensor& t) {
  if (t.dim() == 0) return 1;
  return t.size(0) == 0 ? 0 : t.numel() / t.size(0);
}

at::Tensor flat_concat(const WorkList& tensors) {
  std::vector<at::Tensor> flats;
  flats.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flats.push_back(t.reshape({-1}));
  return at::cat(flats);
}

// Copies consecutive blocks of flat into the tensors (each reshaped to its own shape).
void split_into(const at::Tensor& flat, const WorkList& tensors) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace

// What a rank is about to do, in numbers every rank must agree on.
struct TpuBackend::Record {
  int64_t kind;
  int64_t dtype = -1;
  int64_t numel = 0;
  int64_t root = -1;
  int64_t reduce_op = -1;
  int64_t count = 1;
  static constexpr int kFields = 6;

  static Record of(Kind kind, const at::Tensor& t, int64_t numel, int64_t root = -1,
                   int64_t reduce_op = -1, int64_t count = 1) {
    return Record{kind, static_cast<int64_t>(t.scalar_type()), numel, root, reduce_op, count};
  }

  static std::string describe(const int64_t* f) {
    std::ostringstream out;
    out << op_name(f[0]);
    if (f[0] == kBarrier) return out.str();
    out << " of " << f[5] << (f[5] == 1 ? " tensor" : " tensors") << " ("
        << (f[1] >= 0 ? c10::toString(static_cast<at::ScalarType>(f[1])) : "?") << ", " << f[2]
        << " elements";
    if (f[3] >= 0) out << ", root " << f[3];
    if (f[4] >= 0) out << ", ReduceOp " << f[4];
    out << ")";
    return out.str();
  }
};

TpuBackend::TpuBackend(std::unique_ptr<CollectiveEngine> engine, int rank, int size,
                       bool check_agreement)
    : c10d::Backend(rank, size), engine_(std::move(engine)), check_agreement_(check_agreement) {}

void TpuBackend::agree(const Record& mine, const std::vector<int64_t>& input_splits,
                       const std::vector<int64_t>& output_splits) {
  if (!check_agreement_ || size_ == 1) return;
  const int64_t width = Record::kFields + 2 * size_;
  at::Tensor record = at::full({width}, -1, at::kLong);
  int64_t* r = record.data_ptr<int64_t>();
  int64_t fields[] = {mine.kind, mine.dtype, mine.numel, mine.root, mine.reduce_op, mine.count};
  std::copy(std::begin(fields), std::end(fields), r);
  std::copy(input_splits.begin(), input_splits.end(), r + Record::kFields);
  std::copy(output_splits.begin(), output_splits.end(), r + Record::kFields + size_);
  at::Tensor all = engine_->exchange_records(record);
  const int64_t* a = all.data_ptr<int64_t>();
  const int64_t* first = a;
  for (int other = 1; other < size_; ++other) {
    const int64_t* theirs = a + other * width;
    bool same = std::equal(first, first + Record::kFields, theirs);
    if (mine.kind == kAllToAll && first[0] == kAllToAll && theirs[0] == kAllToAll) {
      // Only the element type and the splits must agree.
      same = first[1] == theirs[1];
    }
    TORCH_CHECK(same, "Detected mismatch between collectives on ranks: rank 0 called ",
                Record::describe(first), ", rank ", other, " called ", Record::describe(theirs));
  }
  if (mine.kind != kAllToAll) return;
  for (int src = 0; src < size_; ++src) {
    for (int dst = 0; dst < size_; ++dst) {
      int64_t sent = a[src * width + Record::kFields + dst];
      int64_t expected = a[dst * width + Record::kFields + size_ + src];
      TORCH_CHECK(sent == expected,
                  "Detected mismatch between collectives on ranks: all_to_all: rank ", src,
                  " sends ", sent, " elements to rank ", dst, ", which expects ", expected);
    }
  }
}

c10::intrusive_ptr<Work> TpuBackend::broadcast(WorkList& tensors,
                                               const c10d::BroadcastOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(tensors.size() == 1, "broadcast: expected one tensor, got ", tensors.size());
  check_same("broadcast", tensors[0], {});
  check_root("broadcast", static_cast<int>(opts.rootRank), size_);
  agree(Record::of(kBroadcast, tensors[0], tensors[0].numel(), opts.rootRank));
  return engine_->broadcast(tensors[0], static_cast<int>(opts.rootRank));
}

c10::intrusive_ptr<Work> TpuBackend::allreduce(WorkList& tensors,
                                               const c10d::AllreduceOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(!tensors.empty(), "all_reduce: no tensors");
  check_same("all_reduce", tensors[0], tensors);
  check_reduction("all_reduce", tensors[0], opts.reduceOp);
  int64_t numel = 0;
  for (const at::Tensor& t : tensors) numel += t.numel();
  agree(Record::of(kAllReduce, tensors[0], numel, -1, opts.reduceOp.op_,
                   static_cast<int64_t>(tensors.size())));
  return engine_->all_reduce(tensors, opts.reduceOp);
}

c10::intrusive_ptr<Work> TpuBackend::allreduce_coalesced(
    WorkList& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  NoAutograd no_autograd;
  return allreduce(tensors, opts);
}

c10::intrusive_ptr<Work> TpuBackend::reduce(WorkList& tensors, const c10d::ReduceOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(tensors.size() == 1, "reduce: expected one tensor, got ", tensors.size());
  check_same("reduce", tensors[0], {});
  check_reduction("reduce", tensors[0], opts.reduceOp);
  check_root("reduce", static_cast<int>(opts.rootRank), size_);
  agree(Record::of(kReduce, tensors[0], tensors[0].numel(), opts.rootRank, opts.reduceOp.op_));
  return engine_->reduce(tensors[0], static_cast<int>(opts.rootRank), opts.reduceOp);
}

c10::intrusive_ptr<Work> TpuBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                     const c10d::AllgatherOptions& /*opts*/) {
  NoAutograd no_autograd;
  check_same("all_gather_into_tensor", input, {output});
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_,
                    "all_gather_into_tensor: the output has ", output.numel(),
                    " elements, expected ", size_, " x ", input.numel(), " (world size x input)");
  agree(Record::of(kAllGather, input, input.numel()));
  return engine_->all_gather(output, input);
}

c10::intrusive_ptr<Work> TpuBackend::allgather(std::vector<WorkList>& outputs, WorkList& inputs,
                                               const c10d::AllgatherOptions& /*opts*/) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(inputs.size() == 1 && outputs.size() == 1,
                    "all_gather: expected one input tensor and one output list");
  const at::Tensor& input = inputs[0];
  WorkList& list = outputs[0];
  check_same("all_gather", input, list);
  TORCH_CHECK_VALUE(static_cast<int>(list.size()) == size_, "all_gather: the output list has ",
                    list.size(), " tensors, expected one per rank (", size_, ")");
  for (const at::Tensor& o : list)
    TORCH_CHECK_VALUE(o.numel() == input.numel(), "all_gather: an output tensor has ", o.numel(),
                      " elements, the input ", input.numel());
  agree(Record::of(kAllGather, input, input.numel()));
  at::Tensor flat = at::empty({size_ * input.numel()}, input.options());
  engine_->all_gather(flat, input)->wait();
  split_into(flat, list);
  return c10::make_intrusive<CompletedWork>(rank_, c10d::OpType::ALLGATHER, list);
}

c10::intrusive_ptr<Work> TpuBackend::allgather_coalesced(std::vector<WorkList>& outputs,
                                                         WorkList& inputs,
                                                         const c10d::AllgatherOptions& opts) {
  NoAutograd no_autograd;
  // outputs[r][i] receives rank r's inputs[i].
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size_,
                    "all_gather_coalesced: expected one output list per rank (", size_, ")");
  for (const WorkList& list : outputs)
    TORCH_CHECK_VALUE(list.size() == inputs.size(),
                      "all_gather_coalesced: each output list needs one tensor per input");
  WorkList results;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<WorkList> out(1);
    for (int r = 0; r < size_; ++r) out[0].push_back(outputs[r][i]);
    WorkList in{inputs[i]};
    allgather(out, in, opts);
  }
  for (const WorkList& list : outputs) results.insert(results.end(), list.begin(), list.end());
  return c10::make_intrusive<CompletedWork>(rank_, c10d::OpType::ALLGATHER_COALESCED, results);
}

c10::intrusive_ptr<Work> TpuBackend::allgather_into_tensor_coalesced(
    WorkList& outputs, WorkList& inputs, const c10d::AllgatherOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "all_gather_into_tensor_coalesced: one output per input expected");
  for (size_t i = 0; i < inputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
  return c10::make_intrusive<CompletedWork>(rank_, c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<Work> TpuBackend::gather(std::vector<WorkList>& outputs, WorkList& inputs,
                                            const c10d::GatherOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(inputs.size() == 1, "gather: expected one input tensor");
  int root = static_cast<int>(opts.rootRank);
  check_root("gather", root, size_);
  const at::Tensor& input = inputs[0];
  WorkList list;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                      "gather: the root needs a list of one output tensor per rank (", size_, ")");
    list = outputs[0];
    for (const at::Tensor& o : list)
      TORCH_CHECK_VALUE(o.numel() == input.numel(), "gather: an output tensor has ", o.numel(),
                        " elements, the input ", input.numel());
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "gather: only the root rank passes output tensors");
  }
  check_same("gather", input, list);
  agree(Record::of(kGather, input, input.numel(), root));
  return engine_->gather(list, input, root);
}

c10::intrusive_ptr<Work> TpuBackend::scatter(WorkList& outputs, std::vector<WorkList>& inputs,
                                             const c10d::ScatterOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(outputs.size() == 1, "scatter: expected one output tensor");
  int root = static_cast<int>(opts.rootRank);
  check_root("scatter", root, size_);
  const at::Tensor& output = outputs[0];
  WorkList list;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                      "scatter: the root needs a list of one input tensor per rank (", size_, ")");
    list = inputs[0];
    for (const at::Tensor& i : list)
      TORCH_CHECK_VALUE(i.numel() == output.numel(), "scatter: an input tensor has ", i.numel(),
                        " elements, the output ", output.numel());
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "scatter: only the root rank passes input tensors");
  }
  check_same("scatter", output, list);
  agree(Record::of(kScatter, output, output.numel(), root));
  return engine_->scatter(output, list, root);
}

c10::intrusive_ptr<Work> TpuBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                          const c10d::ReduceScatterOptions& opts) {
  NoAutograd no_autograd;
  check_same("reduce_scatter_tensor", output, {input});
  check_reduction("reduce_scatter_tensor", input, opts.reduceOp);
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_,
                    "reduce_scatter_tensor: the input has ", input.numel(), " elements, expected ",
                    size_, " x ", output.numel(), " (world size x output)");
  agree(Record::of(kReduceScatter, output, output.numel(), -1, opts.reduceOp.op_));
  return engine_->reduce_scatter(output, input, opts.reduceOp);
}

c10::intrusive_ptr<Work> TpuBackend::reduce_scatter(WorkList& outputs,
                                                    std::vector<WorkList>& inputs,
                                                    const c10d::ReduceScatterOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                    "reduce_scatter: expected one output tensor and one input list");
  at::Tensor& output = outputs[0];
  const WorkList& list = inputs[0];
  check_same("reduce_scatter", output, list);
  TORCH_CHECK_VALUE(static_cast<int>(list.size()) == size_, "reduce_scatter: the input list has ",
                    list.size(), " tensors, expected one per rank (", size_, ")");
  for (const at::Tensor& i : list)
    TORCH_CHECK_VALUE(i.numel() == output.numel(), "reduce_scatter: an input tensor has ",
                      i.numel(), " elements, the output ", output.numel());
  at::Tensor flat = flat_concat(list);
  return _reduce_scatter_base(output, flat, opts);
}

c10::intrusive_ptr<Work> TpuBackend::reduce_scatter_tensor_coalesced(
    WorkList& outputs, WorkList& inputs, const c10d::ReduceScatterOptions& opts) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "reduce_scatter_tensor_coalesced: one output per input expected");
  for (size_t i = 0; i < inputs.size(); ++i) _reduce_scatter_base(outputs[i], inputs[i], opts);
  return c10::make_intrusive<CompletedWork>(rank_, c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<Work> TpuBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& output_split_sizes,
                                                   std::vector<int64_t>& input_split_sizes,
                                                   const c10d::AllToAllOptions& /*opts*/) {
  NoAutograd no_autograd;
  check_same("all_to_all_single", output, {input});
  int64_t in_row = row_elements(input);
  int64_t out_row = row_elements(output);
  std::vector<int64_t> in_rows = rows_split("input", input_split_sizes, input, size_);
  std::vector<int64_t> out_rows = rows_split("output", output_split_sizes, output, size_);
  std::vector<int64_t> in_elements = times(in_rows, in_row);
  std::vector<int64_t> out_elements = times(out_rows, out_row);
  agree(Record::of(kAllToAll, input, input.numel()), in_elements, out_elements);
  return engine_->all_to_all(output, input, out_elements, in_elements);
}

c10::intrusive_ptr<Work> TpuBackend::alltoall(WorkList& outputs, WorkList& inputs,
                                              const c10d::AllToAllOptions& /*opts*/) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(
      static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
      "all_to_all: expected one input and one output tensor per rank (", size_, ")");
  check_same("all_to_all", inputs[0], inputs);
  check_same("all_to_all", inputs[0], outputs);
  std::vector<int64_t> in_elements, out_elements;
  for (const at::Tensor& t : inputs) in_elements.push_back(t.numel());
  for (const at::Tensor& t : outputs) out_elements.push_back(t.numel());
  at::Tensor in = flat_concat(inputs);
  int64_t total_out = 0;
  for (int64_t n : out_elements) total_out += n;
  at::Tensor out = at::empty({total_out}, inputs[0].options());
  agree(Record::of(kAllToAll, inputs[0], in.numel()), in_elements, out_elements);
  engine_->all_to_all(out, in, out_elements, in_elements)->wait();
  split_into(out, outputs);
  return c10::make_intrusive<CompletedWork>(rank_, c10d::OpType::ALLTOALL, outputs);
}

c10::intrusive_ptr<Work> TpuBackend::send(WorkList& tensors, int dst, int tag) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(tensors.size() == 1, "send: expected one tensor, got ", tensors.size());
  check_same("send", tensors[0], {});
  check_peer("send", dst, rank_, size_);
  return engine_->send(tensors[0], dst, tag);
}

c10::intrusive_ptr<Work> TpuBackend::recv(WorkList& tensors, int src, int tag) {
  NoAutograd no_autograd;
  TORCH_CHECK_VALUE(tensors.size() == 1, "recv: expected one tensor, got ", tensors.size());
  check_same("recv", tensors[0], {});
  check_peer("recv", src, rank_, size_);
  return engine_->recv(tensors[0], src, tag);
}

c10::intrusive_ptr<Work> TpuBackend::recvAnysource(WorkList& /*tensors*/, int /*tag*/) {
  NoAutograd no_autograd;
  TORCH_CHECK(false, "recv without a source rank is not supported by the tpu backend: pass src=");
}

c10::intrusive_ptr<Work> TpuBackend::barrier(const c10d::BarrierOptions& /*opts*/) {
  NoAutograd no_autograd;
  if (check_agreement_) {
    agree(Record{kBarrier});  // the exchange itself is a barrier
    return c10::make_intrusive<CompletedWork>(rank_, c10d::OpType::BARRIER, WorkList{});
  }
  return engine_->barrier();
}

}  // namespace tpu::distributed
