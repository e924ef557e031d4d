#include "ffi_call.h"

#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdexcept>

#include "matmul.h"
#include "pjrt/ffi_extension.h"
#include "runtime/runtime.h"

namespace tpu::host_kernels {

namespace {

c10::ScalarType scalar_type(ffi::DataType type) {
  switch (type) {
    case ffi::kF32: return c10::kFloat;
    case ffi::kF64: return c10::kDouble;
  }
  throw std::invalid_argument("unsupported element type " + std::to_string(type));
}

}  // namespace

bool not_an_execution(ffi::CallFrame* frame) {
  ffi::ExtensionBase* extension = frame->extension_start;
  if (extension != nullptr && extension->type == ffi::kExtensionMetadata) {
    ffi::Metadata* metadata = reinterpret_cast<ffi::MetadataExtension*>(extension)->metadata;
    metadata->api_version.major_version = ffi::kApiMajor;
    metadata->api_version.minor_version = ffi::kApiMinor;
    metadata->traits = 0;
    return true;
  }
  return frame->stage != ffi::kExecute;
}

ffi::Error* fail(const ffi::CallFrame* frame, const std::string& message) {
  ffi::ErrorCreateArgs args{};
  args.struct_size = sizeof(args);
  args.message = message.c_str();
  args.errc = ffi::kInternal;
  return frame->api->error_create(&args);
}

at::Tensor as_tensor(const ffi::Buffer& buffer) {
  return at::from_blob(buffer.data, c10::IntArrayRef(buffer.dims, buffer.rank),
                       at::TensorOptions().dtype(scalar_type(buffer.dtype)));
}

double scalar_of(const ffi::Buffer& buffer) {
  if (buffer.rank == 0 && buffer.dtype == ffi::kF32) return *static_cast<const float*>(buffer.data);
  if (buffer.rank == 0 && buffer.dtype == ffi::kF64)
    return *static_cast<const double*>(buffer.data);
  throw std::invalid_argument("expected a float32 or float64 scalar operand");
}

c10::ArrayRef<int64_t> int64s_of(const ffi::Buffer& buffer, int64_t count) {
  if (buffer.dtype != ffi::kS64 || buffer.rank != 1 || (count >= 0 && buffer.dims[0] != count)) {
    throw std::invalid_argument("malformed int64 vector operand");
  }
  return {static_cast<const int64_t*>(buffer.data), static_cast<size_t>(buffer.dims[0])};
}

OneThread::OneThread() {
  // PyTorch sets a thread's OpenMP team size the first time the thread asks for it; asking now
  // (libtorch's own copy of the lazy initialization) keeps that from undoing the size set below.
  at::get_num_threads();
  if (MKL_Set_Num_Threads_Local) previous_mkl_ = MKL_Set_Num_Threads_Local(1);
  if (omp_set_num_threads && omp_get_max_threads) {
    previous_omp_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
}

OneThread::~OneThread() {
  if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(previous_mkl_);
  if (omp_set_num_threads && previous_omp_ > 0) omp_set_num_threads(previous_omp_);
}

bool on_main_thread() {
  thread_local const bool main = getpid() == static_cast<pid_t>(syscall(SYS_gettid));
  return main;
}

bool register_handlers(const std::vector<std::pair<std::string, ffi::Handler*>>& handlers,
                       const char* kernels) {
  const pjrt::Plugin& plugin = runtime::Runtime::get().client().plugin();
  for (const auto& [target, handler] : handlers) {
    try {
      if (!pjrt::register_ffi_handler(plugin, target, "Host", reinterpret_cast<void*>(handler))) {
        return false;
      }
    } catch (const std::exception& error) {
      // A plugin whose FFI extension differs from the one we support: XLA's own code serves.
      TORCH_WARN("torch_tpu: the CPU plugin refused the host ", kernels,
                 " kernels, so they run as XLA's code: ", error.what());
      return false;
    }
  }
  return true;
}

bool KernelSet::install(const std::vector<std::pair<std::string, ffi::Handler*>>& handlers) {
  if (installed_) return true;  // a later Runtime::initialize call of the same process
  if (!host_matmul_installed()) return false;
  if (!register_handlers(handlers, kernels_)) return false;
  installed_ = true;
  return true;
}

bool KernelSet::enabled() const {
  return installed_.load(std::memory_order_relaxed) && host_matmul_enabled();
}

}  // namespace tpu::host_kernels
