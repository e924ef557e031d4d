#pragma once
// Builds one StableHLO function (`@main`) as MLIR text in the generic op syntax,
// which is the form every StableHLO release parses the same way.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "types.h"

namespace tpu::hlo {

// An SSA value of the function being built. Cheap to copy.
struct Value {
  int id = -1;  // parameters are negative (-1 - index), op results non-negative
  TensorType type;
  int result = -1;  // which result of a multi-result op, or -1
  const std::vector<int64_t>& dims() const { return type.dims; }
  ElementType element() const { return type.element; }
  int64_t rank() const { return type.rank(); }
};

enum class Compare { EQ, NE, LT, LE, GT, GE };

// How many bf16 passes a float32 dot or convolution takes on a TPU (XLA's precision_config):
// DEFAULT one, HIGH three, HIGHEST full float32. PyTorch's float32 matmul precision
// "medium", "high", "highest" map onto them.
enum class MatmulPrecision { Default, High, Highest };

// A function the program calls but that was not built here (a JAX module's functions):
// `text` is one or more whole func.func definitions, `name` the symbol called. The name
// must identify the text (it carries a hash of it), so a graph adds each one only once.
struct Callee {
  std::string name;
  std::shared_ptr<const std::string> text;
};
enum class Reduction { Add, Mul, Max, Min, And, Or };

class Builder {
 public:
  // A new function argument, in order of creation.
  Value parameter(const TensorType& type);
  int num_parameters() const { return static_cast<int>(parameters_.size()); }
  // Marks parameter `index` as donated into result `output` (same type required).
  void alias_parameter(int index, int output);

  // A scalar constant of `type` (structural constants only: values that change
  // between calls must be parameters, or every new value compiles a new program).
  Value constant(double value, ElementType type);
  Value constant_i64(const std::vector<int64_t>& values);

  // Elementwise ops named as in StableHLO ("add", "exponential", ...), result type = operand's.
  Value unary(const char* op, const Value& x);
  Value binary(const char* op, const Value& a, const Value& b);
  Value compare(Compare direction, const Value& a, const Value& b);
  Value select(const Value& pred, const Value& on_true, const Value& on_false);
  // Float to s8/s16/s32/s64/u8 converts as PyTorch's CPU kernels do on x86 (see
  // float_to_int_as_cpu), anything to an 8-bit float as PyTorch does (see to_float8);
  // every other conversion is stablehlo.convert's.
  Value convert(const Value& x, ElementType to);
  Value bitcast_convert(const Value& x, const TensorType& to);
  // The real (or imaginary) part of a complex value, and the inverse.
  Value complex_parts(const Value& x, bool imaginary);
  Value make_complex(const Value& real, const Value& imaginary);

  Value reshape(const Value& x, const std::vector<int64_t>& dims);
  Value transpose(const Value& x, const std::vector<int64_t>& permutation);
  Value broadcast_in_dim(const Value& x, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& broadcast_dimensions);
  // NumPy-style broadcast of `x` to `dims` (trailing dimensions aligned).
  Value broadcast_to(const Value& x, const std::vector<int64_t>& dims);
  Value slice(const Value& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides);
  Value pad(const Value& x, const Value& padding_value, const std::vector<int64_t>& low,
            const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
  Value concatenate(const std::vector<Value>& values, int64_t dimension);
  Value iota(const TensorType& type, int64_t dimension);
  Value dot_general(const Value& lhs, const Value& rhs, const std::vector<int64_t>& lhs_batch,
                    const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                    const std::vector<int64_t>& rhs_contract, ElementType result);
  Value reduce(const Value& x, const Value& init, Reduction kind, const std::vector<int64_t>& dims);
  // x, computed in full before any op reads it: XLA fuses no producer of x into x's users.
  Value optimization_barrier(const Value& x);
  // Lowerings for XLA:CPU work around two weaknesses of its code generator when this is set
  // (a speed shortcut: runtime/xla_cpu_shortcuts.h):
  // - it fuses a reduction that keeps the innermost dimension (a column reduction, such as a
  //   bias gradient's sum over rows) with the ops producing its input, and emits the fusion as a
  //   loop over the outputs that gathers every column element by element, several times slower
  //   than reducing a stored array (a quarter of the GPT training step's device time), so
  //   reduce() then reads the input of such reductions through an optimization barrier;
  // - it calls libm's scalar sinf/cosf per element; see trig.h.
  void set_for_xla_cpu(bool on) { for_xla_cpu_ = on; }
  // Floating-point maximum and minimum propagate a NaN from either operand when set: XLA:CPU's
  // fast min/max returns `a` when `b` is NaN. A correctness fix for the CPU plugin, needed
  // there with or without the speed shortcuts; TPU and GPU compilers propagate NaN themselves.
  void set_nan_propagating_min_max(bool on) { nan_propagating_min_max_ = on; }
  // The precision of float32 dots and convolutions built from now on (default: Highest).
  void set_matmul_precision(MatmulPrecision precision) { matmul_precision_ = precision; }
  MatmulPrecision matmul_precision() const { return matmul_precision_; }
  // The `precision_config` attribute for a dot or convolution of `lhs`, `rhs`, with its
  // leading ", ": empty unless both are float32 (or complex64) and the precision is not DEFAULT.
  std::string precision_config(const Value& lhs, const Value& rhs) const;
  bool for_xla_cpu() const { return for_xla_cpu_; }
  // Float32 and float64 matrix products (rank 2, or rank 3 batched over the first dimension)
  // become custom calls of torch_tpu's host matmul kernels (host_kernels/matmul.h) when set:
  // for the CPU plugin once they are registered.
  void set_host_matmul(bool on) { host_matmul_ = on; }

  // x, or x through an optimization barrier where set_for_xla_cpu asks for one: the operand
  // to give a reduction over `dims` (reduce() does; variadic reduces built with op_multi should).
  Value reduction_input(const Value& x, const std::vector<int64_t>& dims);

  // stablehlo.if: runs on_true or on_false as the scalar `pred` (i1) says. Each body may use
  // this function's values and returns values of the `results` types (at least one); values
  // made inside a body are not visible after the if, and a body must not add parameters.
  using BranchBody = std::function<std::vector<Value>(Builder&)>;
  std::vector<Value> if_else(const Value& pred, const std::vector<TensorType>& results,
                             const BranchBody& on_true, const BranchBody& on_false);
  // result[i...] = operand[indices[i...]] for a 1-D operand and integer indices of any shape.
  Value gather_1d(const Value& operand, const Value& indices);
  // operand with operand[indices[i...]] = updates[i...] (1-D operand, same-shape indices/updates).
  Value scatter_1d(const Value& operand, const Value& indices, const Value& updates);
  // Random bits from the counter-based generator: returns {new_state, bits} where
  // `state` is a ui64[2] key (seed, offset) and bits has `type` (an unsigned type).
  std::vector<Value> rng_bit_generator(const Value& state, const TensorType& type);
  Value dynamic_update_slice(const Value& operand, const Value& update,
                             const std::vector<Value>& start_indices);
  // operand[start_indices... : + sizes] with run-time (scalar integer) starts.
  Value dynamic_slice(const Value& operand, const std::vector<Value>& start_indices,
                      const std::vector<int64_t>& sizes);

  // Calls `callee` (added to this program's module) on `operands`: func.call, which XLA
  // inlines, so the callee fuses with the ops around it.
  std::vector<Value> call(const Callee& callee, const std::vector<Value>& operands,
                          const std::vector<TensorType>& results);
  // The functions call() added, in order of first use; module_text() includes them, a
  // deferred graph adds them to its own module.
  const std::vector<Callee>& callees() const { return callees_; }

  // The module text returning `results` from @main.
  std::string module_text(const std::vector<Value>& results) const;
  // The same program as one function `name` ("private @f3", "public @main") for a
  // module that holds several (the deferred graph calls each op's function).
  std::string function_text(const std::string& name, const std::vector<Value>& results) const;

  // Any StableHLO op, in generic form:
  //   %r = "stablehlo.<name>"(operands) <region> {<attributes>} : (types) -> result
  Value op(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
           const std::string& attributes = "", const std::string& region = "");
  // The same for ops with several results (sort, rng_bit_generator, variadic reduce).
  std::vector<Value> op_multi(const std::string& name, const std::vector<Value>& operands,
                              const std::vector<TensorType>& results,
                              const std::string& attributes = "", const std::string& region = "");
  // A call of the host kernel registered with the plugin under `target` (a typed-FFI custom
  // call, as torch_tpu's host kernels are; see csrc/host_kernels).
  std::vector<Value> host_call(const std::string& target, const std::vector<Value>& operands,
                               const std::vector<TensorType>& results);
  // A single-block region for reduce, scatter, sort, reduce_window, select_and_scatter...:
  // `body` receives the block arguments (of `argument_types`, usually scalars) and
  // returns the values the region yields. Values of the enclosing function are not
  // visible inside; build constants in `body`.
  using RegionBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  std::string region(const std::vector<TensorType>& argument_types, const RegionBody& body);

 private:
  // C++'s float-to-integer cast as compiled for x86, which PyTorch's CPU results follow: a
  // truncating conversion to 32 or 64 bits that gives the type's minimum for NaN and values
  // out of range, narrowed to 8 or 16 bits by dropping the high bits (so 300.5 to int8 is
  // 44). stablehlo.convert saturates instead (300.5 to int8 is 127).
  Value float_to_int_as_cpu(const Value& x, ElementType to);
  // To an 8-bit float as PyTorch converts: through float32 (a double is first rounded to
  // float, as c10's Float8 constructors take a float), then once to nearest-even on the 8-bit
  // grid. stablehlo.convert on XLA:CPU rounds twice (through f16: 5.2507 becomes 5.0, not 5.5)
  // and gives NaN, not +0, for a negative value that rounds to zero in the fnuz types.
  Value to_float8(const Value& x, ElementType to);
  Value emit(const std::string& op, const std::vector<Value>& operands, const TensorType& result,
             const std::string& attributes = "", const std::string& region = "") {
    return this->op(op, operands, result, attributes, region);
  }
  std::string name(const Value& v) const;
  // dot_general of 64-bit integers as a broadcast product summed over the contracting
  // dimensions: the TPU compiler cannot rewrite a 64-bit dot into 32-bit parts ("X64
  // rewriting not implemented") but can rewrite multiplies and sums.
  Value dot_as_multiply_and_sum(const Value& lhs, const Value& rhs,
                                const std::vector<int64_t>& lhs_batch,
                                const std::vector<int64_t>& rhs_batch,
                                const std::vector<int64_t>& lhs_contract,
                                const std::vector<int64_t>& rhs_contract, ElementType result);
  // The host matmul custom call for dot_general, or nullopt where it does not apply.
  std::optional<Value> host_matmul(const Value& lhs, const Value& rhs,
                                   const std::vector<int64_t>& lhs_batch,
                                   const std::vector<int64_t>& rhs_batch,
                                   const std::vector<int64_t>& lhs_contract,
                                   const std::vector<int64_t>& rhs_contract, ElementType result);
  // This builder's ops and a "stablehlo.return" of `yielded`: a region's or a branch's block.
  std::string body_and_return(const std::vector<Value>& yielded) const;
  // "{ ops; stablehlo.return }" of a branch that shares this builder's names.
  std::string branch(const std::vector<TensorType>& results, const BranchBody& body);
  // "\"stablehlo.<name>\"(operands) <region> {<attributes>} : (operand types)".
  std::string op_text(const std::string& op_name, const std::vector<Value>& operands,
                      const std::string& attributes, const std::string& region) const;

  std::vector<TensorType> parameters_;
  std::vector<int> parameter_alias_;
  std::vector<Callee> callees_;  // output index or -1
  std::string body_;
  int next_id_ = 0;
  std::string prefix_;      // SSA name prefix: "" for @main, unique per region
  bool in_region_ = false;  // parameters are block arguments, not function arguments
  int next_region_ = 0;
  bool for_xla_cpu_ = false;
  bool nan_propagating_min_max_ = false;
  bool host_matmul_ = false;
  // Values made by a transpose of the last two dimensions, by result id, and their operand: a
  // host matmul reads the operand with a transposed BLAS call instead of a copy.
  std::unordered_map<int, Value> swapped_last_two_;
  MatmulPrecision matmul_precision_ = MatmulPrecision::Highest;
};

// The custom-call target of the host matmul kernel whose operands are stored with their last two
// dimensions swapped as the flags say.
std::string host_matmul_target(bool transpose_lhs, bool transpose_rhs);

// "array<i64: 1, 2>" (or "array<i64>" when empty).
std::string i64_array(const std::vector<int64_t>& values);

}  // namespace tpu::hlo
