#pragma once
// Reading and writing strided views of a flat storage inside a StableHLO program.
// A tpu storage is one 1-D buffer; a tensor is (sizes, strides, offset) over it, in
// elements of the tensor's dtype. These functions turn that metadata into ops:
// slice/reshape/transpose/broadcast when the view allows it, a gather or scatter
// of computed indices otherwise.
#include <cstdint>
#include <optional>
#include <vector>

#include "hlo/builder.h"

namespace tpu::runtime {

struct StridedView {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  // The offset as a run-time s64 scalar operand, when set: the program then serves every
  // offset of this view shape (a loop over rows compiles once, not once per row).
  std::optional<hlo::Value> offset_operand;

  int64_t numel() const;
  // Row-major contiguous (strides of size-1 dimensions are ignored).
  bool is_contiguous() const;
  // The view addresses exactly the elements [0, storage_elements) once each.
  bool covers_exactly(int64_t storage_elements) const;
};

// The view's values (shape `view.sizes`) out of the 1-D `storage`.
hlo::Value read_strided(hlo::Builder& b, const hlo::Value& storage, const StridedView& view);

// `storage` with the view's elements replaced by `values` (shape `view.sizes`).
hlo::Value write_strided(hlo::Builder& b, const hlo::Value& storage, const StridedView& view,
                         const hlo::Value& values);

// The storage contents when `view` addresses every element of a storage exactly
// once (covers_exactly): `values` laid out in memory order. `shape`, if given, receives
// the shape of that layout before it is flattened.
hlo::Value dense_storage(hlo::Builder& b, const StridedView& view, const hlo::Value& values,
                         std::vector<int64_t>* shape = nullptr);

// The bytes of the 1-D `storage` seen as elements of `type` (a bit cast: what
// Tensor.view(dtype) does). The byte length must divide evenly.
hlo::Value reinterpret(hlo::Builder& b, const hlo::Value& storage, hlo::ElementType type);

}  // namespace tpu::runtime
