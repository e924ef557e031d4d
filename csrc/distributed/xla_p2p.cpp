#include "distributed/xla_p2p.h"

#include <ATen/ATen.h>

#include <condition_variable>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "aten/program.h"
#include "aten/storage.h"
#include "distributed/work.h"
#include "hlo/builder.h"
#include "hlo/collectives.h"
#include "pjrt/client.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu::distributed {

namespace {

// The receiver's header travels back on tag + kReplyTagOffset: on the message's own tag it
// would be matched against the receiver's own sends to the sender, which run in another order.
constexpr int kReplyTagOffset = 1 << 30;
// Group collectives number their launches from 1 up; messages take ids from here on, so
// the two never meet in the plugin's rendezvous.
constexpr int kFirstLaunchId = 1 << 30;
constexpr int64_t kHeaderMagic = 0x7470755f786c6121;  // marks a torch_tpu xla p2p header

// The header both sides send: who they are in the message and what they move.
enum HeaderField { kMagic, kRole, kDtype, kNumel, kLaunchId, kHeaderFields };
constexpr int64_t kSenderRole = 0;
constexpr int64_t kReceiverRole = 1;

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string describe(at::ScalarType dtype, int64_t numel) {
  return std::string("a ") + c10::toString(dtype) + " tensor of " + std::to_string(numel) +
         (numel == 1 ? " element" : " elements");
}

}  // namespace

// One message as both of its threads see it: the caller's (which prepares it and, through
// the Work, writes what was received) and its launch thread's.
struct XlaPointToPoint::Message {
  // Fixed before the launch thread starts.
  bool sending = false;
  int peer = -1;
  int tag = 0;
  int launch_id = 0;
  at::ScalarType dtype = at::kFloat;
  int64_t numel = 0;
  at::Tensor header;       // this side's, a cpu tensor
  at::Tensor peer_header;  // the other side's, written by the control engine
  WorkPtr header_sent;
  WorkPtr peer_header_received;
  std::shared_ptr<pjrt::Executable> executable;
  pjrt::BufferPtr operand;  // this side's bytes (zeros on the receiver)
  PJRT_Device* device = nullptr;

  // Set by the launch thread.
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;
  std::exception_ptr error;
  pjrt::BufferPtr received;  // the receiver's bytes

  std::string what() const {
    return (sending ? "send to rank " : "recv from rank ") + std::to_string(peer) + " (tag " +
           std::to_string(tag) + ")";
  }

  // Raises on this side when the two sides do not describe the same message (the peer
  // raises the same, so neither launches).
  void check_peer_header() const {
    const int64_t* h = peer_header.data_ptr<int64_t>();
    const int64_t role = sending ? kReceiverRole : kSenderRole;
    TORCH_CHECK(h[kMagic] == kHeaderMagic && h[kRole] == role, what(), ": rank ", peer,
                " did not answer with a ", sending ? "recv" : "send",
                " of a tpu tensor; with the xla engine both ends of a message must be tpu "
                "tensors or both cpu tensors");
    const auto peer_dtype = static_cast<at::ScalarType>(h[kDtype]);
    if (peer_dtype != dtype || h[kNumel] != numel) {
      const std::string theirs = describe(peer_dtype, h[kNumel]);
      const std::string mine = describe(dtype, numel);
      if (sending) {
        TORCH_CHECK(false, what(), ": rank ", peer, " receives into ", theirs,
                    ", but this rank sends ", mine);
      }
      TORCH_CHECK(false, what(), ": rank ", peer, " sent ", theirs,
                  ", but this rank receives into ", mine);
    }
    TORCH_CHECK(h[kLaunchId] == launch_id, what(), ": the ranks count their messages on this tag ",
                "differently (launch ids ", launch_id, " and ", h[kLaunchId],
                "); an earlier message between them must have failed");
  }

  // The launch thread's whole life: never throws (the error goes to the Work).
  void launch() noexcept {
    std::exception_ptr failure;
    pjrt::BufferPtr output;
    try {
      try {
        // The peer's header first: when the peer took another path, that is what fails
        // at once, while our own header would wait for a receive that never comes.
        peer_header_received->wait();
        header_sent->wait();
      } catch (const std::exception& e) {
        TORCH_CHECK(false, what(), ": exchanging the message's header with rank ", peer,
                    " failed: ", e.what());
      }
      check_peer_header();
      if (executable) {
        try {
          std::vector<pjrt::BufferPtr> outputs =
              executable->execute({operand->get()}, device, launch_id);
          outputs.front()->ready_event()->await();
          output = std::move(outputs.front());
        } catch (const std::exception& e) {
          TORCH_CHECK(false, what(), " failed in the xla collective_permute: ", e.what());
        }
        runtime::metrics().count_execution();
        runtime::metrics().count_native(sending ? "c10d::send" : "c10d::recv");
      }
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex);
    operand.reset();  // the sent bytes are no longer needed
    error = failure;
    if (!sending) received = std::move(output);
    finished = true;
    finished_cv.notify_all();
  }
};

XlaPointToPoint::XlaPointToPoint(CollectiveEngine& control, int rank, int device,
                                 std::vector<int64_t> device_ids)
    : control_(control), rank_(rank), device_(device), device_ids_(std::move(device_ids)) {}

bool XlaPointToPoint::serves_tag(int tag) { return tag >= 0 && tag < kReplyTagOffset; }

int XlaPointToPoint::next_launch_id(int src, int dst, int tag) {
  int64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(count_mutex_);
    n = counts_[{src, dst, tag}]++;
  }
  // Device ids, not group ranks: two groups over the same devices number ranks differently.
  uint64_t h = mix(static_cast<uint64_t>(device_ids_[src]));
  h = mix(h ^ static_cast<uint64_t>(device_ids_[dst]));
  h = mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(tag)));
  h = mix(h ^ static_cast<uint64_t>(n));
  return kFirstLaunchId + static_cast<int>(h % static_cast<uint64_t>(kFirstLaunchId));
}

WorkPtr XlaPointToPoint::send(const at::Tensor& tensor, int dst, int tag) {
  return start(tensor, dst, tag, /*sending=*/true);
}

WorkPtr XlaPointToPoint::recv(const at::Tensor& tensor, int src, int tag) {
  return start(tensor, src, tag, /*sending=*/false);
}

WorkPtr XlaPointToPoint::start(const at::Tensor& tensor, int peer, int tag, bool sending) {
  TORCH_CHECK(serves_tag(tag), "XlaPointToPoint: tag ", tag, " out of range");
  auto m = std::make_shared<Message>();
  m->sending = sending;
  m->peer = peer;
  m->tag = tag;
  m->dtype = tensor.scalar_type();
  m->numel = tensor.numel();
  const int src = sending ? rank_ : peer;
  const int dst = sending ? peer : rank_;

  // Everything that can fail here comes before the header is posted: once the peer has
  // our header it launches, and would wait in the plugin for a launch that never comes.
  // The program moves bytes: one program per message size, exact for every dtype.
  const int64_t nbytes = m->numel * static_cast<int64_t>(tensor.element_size());
  const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_));
  if (nbytes > 0) {
    const auto byte_options = at::TensorOptions().dtype(at::kByte).device(device);
    at::Tensor bytes =
        sending ? at::empty({nbytes}, byte_options)
                      .copy_(tensor.contiguous().to(device).reshape({-1}).view(at::kByte))
                : at::zeros({nbytes}, byte_options);
    runtime::DeviceStorage* storage = aten::device_storage(bytes.storage());
    aten::materialize(*storage);
    m->operand = storage->buffer();  // runs the pending graph that computes it, if any
    TORCH_INTERNAL_ASSERT(storage->element_type() == hlo::ElementType::U8 &&
                          storage->elements() == nbytes);

    hlo::Builder b;
    hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::U8, {nbytes}});
    const std::string text = b.module_text({hlo::collective_permute(b, x, {{0, 1}})});
    runtime::Runtime& rt = runtime::Runtime::get();
    m->executable =
        rt.programs().get(text, sending ? "c10d::send" : "c10d::recv",
                          pjrt::replicated_compile_options({device_ids_[src], device_ids_[dst]}));
    m->device = rt.client().device(device_);
  }

  // Posted now, on this thread: the control engine matches the messages of one (peer,
  // tag) in the order they are posted, which is program order on both ranks.
  m->launch_id = next_launch_id(src, dst, tag);
  m->header = at::tensor({kHeaderMagic, sending ? kSenderRole : kReceiverRole,
                          static_cast<int64_t>(m->dtype), m->numel, int64_t{m->launch_id}},
                         at::kLong);
  m->peer_header = at::zeros({kHeaderFields}, at::kLong);
  if (sending) {
    m->header_sent = control_.send(m->header, peer, tag);
    m->peer_header_received = control_.recv(m->peer_header, peer, tag + kReplyTagOffset);
  } else {
    m->peer_header_received = control_.recv(m->peer_header, peer, tag);
    m->header_sent = control_.send(m->header, peer, tag + kReplyTagOffset);
  }

  std::thread([m] { m->launch(); }).detach();

  auto step = [m, tensor, device, nbytes](bool block) {
    {
      std::unique_lock<std::mutex> lock(m->mutex);
      if (!block && !m->finished) return false;
      m->finished_cv.wait(lock, [&] { return m->finished; });
      if (m->error) std::rethrow_exception(m->error);
    }
    if (m->received) {
      at::Tensor bytes = at::empty({nbytes}, at::TensorOptions().dtype(at::kByte).device(device));
      aten::device_storage(bytes.storage())
          ->set_buffer(std::move(m->received), hlo::ElementType::U8);
      tensor.copy_(bytes.view(tensor.scalar_type()).reshape(tensor.sizes()));
    }
    return true;
  };
  return c10::make_intrusive<SteppedWork>(rank_, sending ? c10d::OpType::SEND : c10d::OpType::RECV,
                                          std::vector<at::Tensor>{tensor}, step);
}

}  // namespace tpu::distributed
