#pragma once
// tpu storages: the allocator whose DataPtrs own a runtime::DeviceStorage, and the
// accessors the rest of aten/ uses to reach it.
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

#include "runtime/device_buffer.h"

namespace tpu::aten {

// The allocator registered for the tpu device. Its addresses are unique and stable
// for a storage's life but are not host memory: nothing may dereference them.
c10::Allocator* allocator();

// The device side of `storage`, or nullptr for a zero-byte storage.
runtime::DeviceStorage* device_storage(const c10::Storage& storage);

// Grows or shrinks `storage` to `nbytes`, keeping the common prefix of its bytes.
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes);

}  // namespace tpu::aten
