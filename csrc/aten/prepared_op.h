#pragma once
// The fast path for repeated calls: a one-op program kept with where each of its operands
// comes from, keyed by the call's signature, so that a call equal to an earlier one skips
// the lowering. In strict mode it also skips the program text and the program cache's
// lookup, and goes straight to the executable (the host time of a small op is mostly those
// three); in defer_and_fuse mode the op's function text is kept and the call is recorded
// into the pending graph as the lowering would have recorded it.
//
// A lowering opts in by describing its call before it builds its Program:
//
//   PreparedCall call("aten::add.Tensor", {&self, &other, &out}, {&alpha}, {op, common});
//   if (call.run()) return;            // an equal call was prepared: done
//   Program p(name, &call);            // otherwise lower as usual; p.run() prepares it
//
// The contract: two calls with equal signatures lower to the same program. The signature
// holds, per tensor, its dtype, device, sizes, strides, whether its storage offset is zero
// (a non-zero offset is a run-time operand), its storage's size and element type and which
// tensors share a storage; per Scalar only its kind (values are run-time operands); and
// `statics`, every other value the lowering branches on (dtypes it computes, flags,
// whether alpha is 1...; a lowering that reads torch's float32 matmul precision puts it
// there too). The Program records, for each operand, which tensor's storage
// or offset, or which Scalar it is; a program with an operand of any other origin (a
// random key, a constant tensor made inside the lowering) is not prepared.
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "hlo/builder.h"

namespace tpu::pjrt {
class Executable;
}

namespace tpu::aten {

// Where a program's operand comes from, in terms of the call's slots.
struct OperandSource {
  enum class Kind : uint8_t { Storage, Offset, Scalar, CpuItem, Unknown };
  Kind kind = Kind::Unknown;
  int slot = -1;                       // index into the call's tensors or scalars
  c10::ScalarType type = c10::kFloat;  // Offset, Scalar, CpuItem: the operand's dtype
};

struct PreparedEntry;

class PreparedCall {
 public:
  // `tensors` and `scalars` may hold nullptr (an absent optional argument); they must stay
  // alive while the call is lowered or run.
  PreparedCall(const char* op, c10::ArrayRef<const at::Tensor*> tensors,
               c10::ArrayRef<const c10::Scalar*> scalars, const std::vector<int64_t>& statics = {});

  // Runs the program prepared by an equal earlier call (strict mode), or records it into
  // the pending graph (defer_and_fuse mode); false where there is none (then lower the call
  // with a Program given this object).
  bool run();

  // For Program: this call's program depends on more than its signature says; it is not kept.
  void forgo() { eligible_ = false; }
  // For Program: the slot of a tensor (by identity) or of a storage, or -1.
  int tensor_slot(const at::Tensor& tensor) const;
  int storage_slot(const void* device_storage) const;
  int scalar_slot(const c10::Scalar& scalar) const;
  // For Program::run: keeps what it ran for later equal calls, if every operand's source
  // is known. `operand_types` are the operands' dtypes and dims; `outputs` the slots of
  // the written storages with the element type each result leaves there.
  struct Output {
    int slot;
    int element_type;  // hlo::ElementType
  };
  struct Operand {
    OperandSource source;
    std::vector<int64_t> dims;
    hlo::TensorType parameter;  // its parameter's type (a storage: its whole contents)
  };
  void prepare(std::shared_ptr<pjrt::Executable> executable, std::vector<Operand> operands,
               std::vector<Output> outputs);
  // For Program's defer_and_fuse run: keeps the op's function text (see
  // DeferredGraph::record) and the types of the values it leaves in `outputs`, with
  // their shapes before flattening.
  void prepare_deferred(std::string function, std::vector<hlo::Callee> callees,
                        std::vector<Operand> operands, std::vector<Output> outputs,
                        std::vector<hlo::TensorType> output_types,
                        std::vector<std::vector<int64_t>> output_shapes);

 private:
  const char* op_;
  c10::SmallVector<const at::Tensor*, 6> tensors_;
  c10::SmallVector<const c10::Scalar*, 4> scalars_;
  std::vector<int64_t> signature_;
  bool eligible_ = false;  // strict or defer_and_fuse mode, prepared ops on, describable
  bool deferred_ = false;  // defer_and_fuse mode
  bool run_deferred(const PreparedEntry& entry, int device);
  // Stores `entry` for later equal calls if every operand's source and output is known.
  bool keep(std::shared_ptr<PreparedEntry> entry);
  // The value of a run-time scalar operand (a view offset, a Scalar, a wrapped CPU scalar).
  c10::Scalar scalar_operand(const OperandSource& source) const;
};

// Forgets every prepared call (with the program cache's memory: as if the process restarted).
void clear_prepared_ops();

// TORCH_TPU_PREPARED_OPS=0 turns the fast path off (every call lowers, as before).
bool prepared_ops_enabled();

}  // namespace tpu::aten
