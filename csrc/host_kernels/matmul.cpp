#include "matmul.h"

#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ffi_call.h"
#include "hlo/builder.h"
#include "pjrt/ffi_extension.h"
#include "runtime/env_switch.h"
#include "runtime/runtime.h"
#include "xla_ffi.h"

namespace tpu::host_kernels {

namespace {

// Products of at least this many multiply-adds per piece are split between threads. Smaller ones
// run whole: XLA already runs independent products side by side, and splitting the GPT step's
// (2M-8M multiply-adds) made it slower (8.3 -> 8.8 ms); a lone 2048x256x256 product (134M) on a
// worker takes 1.06 ms split in two against 1.83 ms whole.
constexpr int64_t kMinSplitWork = int64_t{32} << 20;

// A buffer as a CPU tensor with its last two dimensions swapped when `transposed`.
at::Tensor as_tensor(const ffi::Buffer& buffer, bool transposed) {
  at::Tensor t = host_kernels::as_tensor(buffer);
  return transposed ? t.transpose(-1, -2) : t;
}

// out = a @ b (ranks 2 or 3), or the piece `index` of `pieces`: a slice of the batch, of the
// rows or of the columns, whichever is longest.
struct Product {
  at::Tensor a, b, out;
  int64_t pieces = 1;

  void run(int64_t index) const {
    if (pieces == 1) return run_kernel(out.numel() * a.size(-1), [&] { multiply(a, b, out); });
    KernelScope scope;
    OneThread one_thread;
    int64_t dim = split_dim();
    int64_t length = out.size(dim);
    int64_t begin = length * index / pieces;
    int64_t size = length * (index + 1) / pieces - begin;
    bool batch = out.dim() == 3 && dim == 0;
    bool rows = dim == out.dim() - 2;
    multiply(batch || rows ? a.narrow(dim, begin, size) : a,
             batch || !rows ? b.narrow(dim, begin, size) : b, out.narrow(dim, begin, size));
  }

  static void multiply(const at::Tensor& x, const at::Tensor& y, const at::Tensor& o) {
    at::Tensor result = o;
    if (o.dim() == 2) {
      at::cpu::mm_out(result, x, y);
    } else {
      at::cpu::bmm_out(result, x, y);
    }
  }

  int64_t split_dim() const {
    int64_t rank = out.dim();
    if (rank == 3 && out.size(0) >= pieces) return 0;
    return out.size(rank - 2) >= out.size(rank - 1) ? rank - 2 : rank - 1;
  }
};

// The pieces of a product shared between the calling thread and XLA's pool. Whoever takes a
// piece runs it, so the caller never waits for a task still queued behind busy workers: it
// runs what is left itself and then waits only for pieces already running.
struct SharedProduct {
  Product product;
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  std::condition_variable finished;
  int64_t done = 0;
  std::string error;

  void run_pieces() {
    for (int64_t i = next++; i < product.pieces; i = next++) {
      std::string failure;
      try {
        product.run(i);
      } catch (const std::exception& e) {
        failure = std::string("piece failed: ") + e.what();
      } catch (...) {
        failure = "piece failed";
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (!failure.empty() && error.empty()) error = failure;
      if (++done == product.pieces) finished.notify_all();
    }
  }

  static void pool_task(void* data) {
    std::unique_ptr<std::shared_ptr<SharedProduct>> self(
        static_cast<std::shared_ptr<SharedProduct>*>(data));
    (*self)->run_pieces();
  }
};

void destroy(const ffi::Api* api, ffi::Error* error) {
  ffi::ErrorDestroyArgs args{};
  args.struct_size = sizeof(args);
  args.error = error;
  api->error_destroy(&args);
}

int64_t pool_threads(const ffi::CallFrame* frame) {
  const ffi::Api* api = frame->api;
  if (api->struct_size < offsetof(ffi::Api, thread_pool_num_threads) + sizeof(void*)) return 0;
  int64_t threads = 0;
  ffi::ThreadPoolNumThreadsArgs args{};
  args.struct_size = sizeof(args);
  args.ctx = frame->ctx;
  args.num_threads = &threads;
  if (ffi::Error* error = api->thread_pool_num_threads(&args)) {
    destroy(api, error);
    return 0;  // no pool: the product runs on the calling thread
  }
  return threads;
}

std::atomic<int64_t> split_products{0};

// Runs `product` in product.pieces pieces, pieces - 1 of them offered to XLA's pool. The caller
// always runs what is left and waits for every piece, even when offering one fails: a piece
// still running must not outlive the call, which owns the result buffer.
void run_split(const ffi::CallFrame* frame, const Product& product) {
  auto shared = std::make_shared<SharedProduct>();
  shared->product = product;
  try {
    for (int64_t i = 1; i < product.pieces; ++i) {
      auto data = std::make_unique<std::shared_ptr<SharedProduct>>(shared);
      ffi::ThreadPoolScheduleArgs args{};
      args.struct_size = sizeof(args);
      args.ctx = frame->ctx;
      args.task = &SharedProduct::pool_task;
      args.data = data.get();
      if (ffi::Error* error = frame->api->thread_pool_schedule(&args)) {
        destroy(frame->api, error);
        break;
      }
      data.release();  // owned by the task now
    }
  } catch (...) {
    // Offering failed (out of memory): the caller runs the rest below.
  }
  shared->run_pieces();
  std::unique_lock<std::mutex> lock(shared->mutex);
  shared->finished.wait(lock, [&] { return shared->done == product.pieces; });
  split_products++;
  if (!shared->error.empty()) throw std::runtime_error(shared->error);
}

// result = op(lhs) @ op(rhs), op a transpose of the last two dimensions where the target's name
// says so (hlo::host_matmul_target); ranks 2 (mm) and 3 (bmm, batch first).
template <bool kTransposeLhs, bool kTransposeRhs>
ffi::Error* matmul(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  if (frame->args.size != 2 || frame->rets.size != 1) {
    return fail(frame, "torch_tpu host matmul: expected 2 operands and 1 result");
  }
  try {
    const auto& lhs = *static_cast<const ffi::Buffer*>(frame->args.args[0]);
    const auto& rhs = *static_cast<const ffi::Buffer*>(frame->args.args[1]);
    const auto& result = *static_cast<const ffi::Buffer*>(frame->rets.args[0]);
    Product product{as_tensor(lhs, kTransposeLhs), as_tensor(rhs, kTransposeRhs),
                    as_tensor(result, false)};
    int64_t work = product.out.numel() * product.a.size(-1);
    static const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
    product.pieces = on_main_thread() ? 1 : std::min(work / kMinSplitWork, cores);
    if (product.pieces > 1) product.pieces = std::min(product.pieces, pool_threads(frame));
    if (product.pieces > 1) {
      run_split(frame, product);
    } else {
      product.pieces = 1;
      product.run(0);
    }
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host matmul: ") + e.what());
  }
}

bool enabled_by_environment() { return runtime::env_switch("TORCH_TPU_HOST_MATMUL", true); }

std::atomic<bool> installed{false};
std::atomic<bool> enabled{true};

}  // namespace

int64_t host_matmul_split_products() { return split_products.load(); }

bool host_matmul_installed() { return installed.load(std::memory_order_relaxed); }
bool host_matmul_enabled() {
  return host_matmul_installed() && enabled.load(std::memory_order_relaxed);
}
void set_host_matmul_enabled(bool on) { enabled = on; }

bool install_host_matmul() {
  if (!enabled_by_environment()) return false;
  if (installed) return true;  // a later Runtime::initialize call of the same process
  std::vector<std::pair<std::string, ffi::Handler*>> handlers;
  handlers.emplace_back(hlo::host_matmul_target(false, false), &matmul<false, false>);
  handlers.emplace_back(hlo::host_matmul_target(true, false), &matmul<true, false>);
  handlers.emplace_back(hlo::host_matmul_target(false, true), &matmul<false, true>);
  handlers.emplace_back(hlo::host_matmul_target(true, true), &matmul<true, true>);
  if (!register_handlers(handlers, "matmul")) return false;
  installed = true;
  return true;
}

}  // namespace tpu::host_kernels
