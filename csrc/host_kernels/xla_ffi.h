#pragma once
// The part of XLA's FFI C ABI (xla/ffi/api/c_api.h, API 0.x) that our host kernels use: the
// call frame a handler receives, the buffers in it, and the API table's error constructor.
// Declared here so the build does not need jaxlib's headers; the layouts are the ABI's and
// must not change.
#include <cstddef>
#include <cstdint>

namespace tpu::host_kernels::ffi {

enum ExtensionType : int { kExtensionMetadata = 1 };

struct ExtensionBase {
  size_t struct_size;
  ExtensionType type;
  ExtensionBase* next;
};

struct ApiVersion {
  size_t struct_size;
  ExtensionBase* extension_start;
  int major_version;
  int minor_version;
};

// What XLA asks a handler for when it is registered (a call frame whose extension chain starts
// with a MetadataExtension): the FFI version it was built against and its traits.
struct Metadata {
  size_t struct_size;
  ApiVersion api_version;
  uint32_t traits;
};
struct MetadataExtension {
  ExtensionBase base;
  Metadata* metadata;
};

enum DataType : int { kS64 = 5, kF32 = 11, kF64 = 12 };

struct Buffer {
  size_t struct_size;
  ExtensionBase* extension_start;
  DataType dtype;
  void* data;
  int64_t rank;
  int64_t* dims;
};

struct Error;
enum ErrorCode : int { kInvalidArgument = 3, kInternal = 13 };
struct ErrorCreateArgs {
  size_t struct_size;
  ExtensionBase* extension_start;
  const char* message;
  ErrorCode errc;
};

struct ErrorDestroyArgs {
  size_t struct_size;
  ExtensionBase* extension_start;
  Error* error;
};

// A task for XLA's intra-op thread pool, the one its own kernels run on.
using Task = void(void* data);
struct ThreadPoolScheduleArgs {
  size_t struct_size;
  ExtensionBase* extension_start;
  void* ctx;
  Task* task;
  void* data;
};
struct ThreadPoolNumThreadsArgs {
  size_t struct_size;
  ExtensionBase* extension_start;
  void* ctx;
  int64_t* num_threads;
};

struct Api {
  size_t struct_size;
  ExtensionBase* extension_start;
  ApiVersion api_version;
  const void* internal_api;
  Error* (*error_create)(ErrorCreateArgs* args);
  void* error_get_message;
  void (*error_destroy)(ErrorDestroyArgs* args);
  void* handler_register;
  void* stream_get;
  void* type_register;
  void* execution_context_get;
  void* state_set;
  void* state_get;
  void* device_memory_allocate;
  void* device_memory_free;
  Error* (*thread_pool_schedule)(ThreadPoolScheduleArgs* args);
  Error* (*thread_pool_num_threads)(ThreadPoolNumThreadsArgs* args);
  // More entries follow; none is used here.
};

enum Stage : int { kInstantiate = 0, kPrepare = 1, kInitialize = 2, kExecute = 3 };

struct Args {
  size_t struct_size;
  ExtensionBase* extension_start;
  int64_t size;
  const int* types;  // 1: a buffer
  void** args;
};
using Rets = Args;

struct Attrs {
  size_t struct_size;
  ExtensionBase* extension_start;
  int64_t size;
  const int* types;
  void** names;
  void** attrs;
};

struct CallFrame {
  size_t struct_size;
  ExtensionBase* extension_start;
  const Api* api;
  void* ctx;
  Stage stage;
  Args args;
  Rets rets;
  Attrs attrs;
};

// The version our handlers report: the oldest 0.x whose call frame has the fields above.
constexpr int kApiMajor = 0;
constexpr int kApiMinor = 1;

using Handler = Error*(CallFrame* frame);

}  // namespace tpu::host_kernels::ffi
