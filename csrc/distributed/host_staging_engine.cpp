#include "distributed/host_staging_engine.h"

#include <ATen/ATen.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "distributed/host_staging.h"
#include "distributed/work.h"

namespace tpu::distributed {

namespace {

constexpr int64_t kHeaderMagic = 0x7470755f70327021;  // marks a torch_tpu p2p header

// A host tensor to receive into: t itself when it is contiguous host memory.
at::Tensor host_target(const at::Tensor& t) {
  return t.is_cpu() && t.is_contiguous() ? t : host_like(t);
}

// A host copy of t that the transport may overwrite without touching t.
at::Tensor scratch_copy(const at::Tensor& t) {
  at::Tensor host = to_host(t);
  return host.is_cpu() && t.is_cpu() && host.data_ptr() == t.data_ptr() ? host.clone() : host;
}

// AVG after gloo's SUM; integers round toward zero, as NCCL's average does.
void divide_for_average(at::Tensor& summed, int size) {
  if (at::isFloatingType(summed.scalar_type()))
    summed.div_(size);
  else
    summed.copy_(at::div(summed, size, "trunc"));
}

std::vector<int64_t> byte_splits(const std::vector<int64_t>& splits, int64_t element_size) {
  std::vector<int64_t> bytes(splits);
  for (int64_t& b : bytes) b *= element_size;
  return bytes;
}

}  // namespace

HostStagingEngine::HostStagingEngine(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size)
    : gloo_(std::move(gloo)), rank_(rank), size_(size) {
  TORCH_CHECK(gloo_, "HostStagingEngine needs a gloo backend");
}

WorkPtr HostStagingEngine::done(c10d::OpType type, std::vector<at::Tensor> outputs) const {
  return c10::make_intrusive<CompletedWork>(rank_, type, std::move(outputs));
}

void HostStagingEngine::reduce_on_host(at::Tensor& host, const c10d::ReduceOp& op, bool all,
                                       int root) {
  ReduceCarrier carrier = reduce_carrier(host.scalar_type(), op);
  at::Tensor wire = host;
  if (at::isComplexType(host.scalar_type()))
    wire = at::view_as_real(host);
  else if (carrier.dtype != host.scalar_type())
    wire = host.to(carrier.dtype);
  apply_premul(wire, op);
  std::vector<at::Tensor> tensors{wire};
  if (all) {
    c10d::AllreduceOptions options;
    options.reduceOp = carrier.op;
    gloo_->allreduce(tensors, options)->wait();
  } else {
    c10d::ReduceOptions options;
    options.reduceOp = carrier.op;
    options.rootRank = root;
    gloo_->reduce(tensors, options)->wait();
  }
  if (carrier.average) divide_for_average(wire, size_);
  if (!at::isComplexType(host.scalar_type())) host = wire;
}

WorkPtr HostStagingEngine::all_reduce(const std::vector<at::Tensor>& tensors,
                                      const c10d::ReduceOp& op) {
  for (const at::Tensor& t : tensors) {
    at::Tensor host = to_host(t);
    reduce_on_host(host, op, /*all=*/true, 0);
    write_back(t, host);
  }
  return done(c10d::OpType::ALLREDUCE, tensors);
}

WorkPtr HostStagingEngine::reduce(const at::Tensor& tensor, int root, const c10d::ReduceOp& op) {
  // Only the root's tensor receives the result; the others must not be scribbled on.
  at::Tensor host = rank_ == root ? to_host(tensor) : scratch_copy(tensor);
  reduce_on_host(host, op, /*all=*/false, root);
  if (rank_ == root) write_back(tensor, host);
  return done(c10d::OpType::REDUCE, {tensor});
}

WorkPtr HostStagingEngine::broadcast(const at::Tensor& tensor, int root) {
  at::Tensor host = rank_ == root ? to_host(tensor) : host_target(tensor);
  std::vector<at::Tensor> bytes{as_bytes(host)};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  gloo_->broadcast(bytes, options)->wait();
  if (rank_ != root) write_back(tensor, host);
  return done(c10d::OpType::BROADCAST, {tensor});
}

WorkPtr HostStagingEngine::all_gather(const at::Tensor& output, const at::Tensor& input) {
  at::Tensor in = to_host(input);
  at::Tensor out = host_target(output);
  at::Tensor out_bytes = as_bytes(out);
  at::Tensor in_bytes = as_bytes(in);
  gloo_->_allgather_base(out_bytes, in_bytes)->wait();
  write_back(output, out);
  return done(c10d::OpType::_ALLGATHER_BASE, {output});
}

WorkPtr HostStagingEngine::reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                                          const c10d::ReduceOp& op) {
  ReduceCarrier carrier = reduce_carrier(input.scalar_type(), op);
  at::Tensor in = scratch_copy(input);
  at::Tensor out = host_like(output);
  if (at::isComplexType(in.scalar_type())) {
    in = at::view_as_real(in);
    out = at::view_as_real(out);
  } else if (carrier.dtype != in.scalar_type()) {
    in = in.to(carrier.dtype);
    out = out.to(carrier.dtype);
  }
  apply_premul(in, op);
  c10d::ReduceScatterOptions options;
  options.reduceOp = carrier.op;
  at::Tensor out_flat = out.reshape({-1});
  at::Tensor in_flat = in.reshape({-1});
  gloo_->_reduce_scatter_base(out_flat, in_flat, options)->wait();
  if (carrier.average) divide_for_average(out, size_);
  write_back(output, at::isComplexType(output.scalar_type()) ? at::view_as_complex(out) : out);
  return done(c10d::OpType::_REDUCE_SCATTER_BASE, {output});
}

WorkPtr HostStagingEngine::all_to_all(const at::Tensor& output, const at::Tensor& input,
                                      const std::vector<int64_t>& output_splits,
                                      const std::vector<int64_t>& input_splits) {
  at::Tensor in = to_host(input);
  at::Tensor out = host_target(output);
  at::Tensor out_bytes = as_bytes(out);
  at::Tensor in_bytes = as_bytes(in);
  int64_t element = static_cast<int64_t>(input.element_size());
  std::vector<int64_t> out_split_bytes = byte_splits(output_splits, element);
  std::vector<int64_t> in_split_bytes = byte_splits(input_splits, element);
  gloo_->alltoall_base(out_bytes, in_bytes, out_split_bytes, in_split_bytes)->wait();
  write_back(output, out);
  return done(c10d::OpType::ALLTOALL_BASE, {output});
}

WorkPtr HostStagingEngine::gather(const std::vector<at::Tensor>& outputs, const at::Tensor& input,
                                  int root) {
  at::Tensor in = to_host(input);
  std::vector<at::Tensor> inputs{as_bytes(in)};
  std::vector<at::Tensor> hosts;
  std::vector<std::vector<at::Tensor>> gathered;
  if (rank_ == root) {
    gathered.emplace_back();
    for (const at::Tensor& o : outputs) {
      hosts.push_back(host_target(o));
      gathered.back().push_back(as_bytes(hosts.back()));
    }
  }
  c10d::GatherOptions options;
  options.rootRank = root;
  gloo_->gather(gathered, inputs, options)->wait();
  for (size_t i = 0; i < hosts.size(); ++i) write_back(outputs[i], hosts[i]);
  return done(c10d::OpType::GATHER, outputs);
}

WorkPtr HostStagingEngine::scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                                   int root) {
  at::Tensor out = host_target(output);
  std::vector<at::Tensor> outputs{as_bytes(out)};
  std::vector<at::Tensor> hosts;
  std::vector<std::vector<at::Tensor>> scattered;
  if (rank_ == root) {
    scattered.emplace_back();
    for (const at::Tensor& i : inputs) {
      hosts.push_back(to_host(i));
      scattered.back().push_back(as_bytes(hosts.back()));
    }
  }
  c10d::ScatterOptions options;
  options.rootRank = root;
  gloo_->scatter(outputs, scattered, options)->wait();
  write_back(output, out);
  return done(c10d::OpType::SCATTER, {output});
}

WorkPtr HostStagingEngine::send(const at::Tensor& tensor, int dst, int tag) {
  // A header first, so the receiver can check the payload before taking it: gloo
  // aborts the process when a message is larger than the posted buffer.
  at::Tensor payload = to_host(tensor);
  at::Tensor header =
      at::tensor({kHeaderMagic, static_cast<int64_t>(tensor.scalar_type()), tensor.numel(),
                  static_cast<int64_t>(tensor.numel() * tensor.element_size())},
                 at::kLong);
  std::vector<at::Tensor> header_list{header};
  std::vector<at::Tensor> payload_list{as_bytes(payload)};
  WorkPtr header_work = gloo_->send(header_list, dst, tag);
  WorkPtr payload_work = gloo_->send(payload_list, dst, tag);
  auto step = [header_work, payload_work, header, payload](bool block) {
    if (!block) return header_work->isCompleted() && payload_work->isCompleted();
    header_work->wait();
    payload_work->wait();
    return true;
  };
  return c10::make_intrusive<SteppedWork>(rank_, c10d::OpType::SEND,
                                          std::vector<at::Tensor>{tensor}, step);
}

struct HostStagingEngine::RecvPosting {
  std::mutex mutex;
  std::condition_variable posted_cv;
  bool posted = false;
  std::exception_ptr error;
  WorkPtr payload_work;
};

WorkPtr HostStagingEngine::recv(const at::Tensor& tensor, int src, int tag) {
  // The payload's receive is posted as soon as the header has arrived and been
  // checked, by a helper thread: the caller may wait on its own sends first (as
  // batch_isend_irecv's works are waited in order), and gloo's sends complete only
  // once the matching receive is posted.
  auto posting = std::make_shared<RecvPosting>();
  std::shared_ptr<RecvPosting> previous;
  {
    std::lock_guard<std::mutex> lock(recv_order_mutex_);
    std::shared_ptr<RecvPosting>& last = last_recv_[{src, tag}];
    previous = last;
    last = posting;
  }
  auto header = at::zeros({4}, at::kLong);
  at::Tensor host = host_target(tensor);
  at::Tensor host_bytes = as_bytes(host);
  at::ScalarType dtype = tensor.scalar_type();
  int64_t numel = tensor.numel();
  int64_t expected_bytes = host_bytes.numel();
  c10::intrusive_ptr<c10d::Backend> gloo = gloo_;
  std::thread([=] {
    std::exception_ptr error;
    WorkPtr payload_work;
    try {
      if (previous) {
        std::unique_lock<std::mutex> lock(previous->mutex);
        previous->posted_cv.wait(lock, [&] { return previous->posted; });
      }
      std::vector<at::Tensor> header_list{header};
      WorkPtr header_work = gloo->recv(header_list, src, tag);
      header_work->wait();
      const int64_t* h = header.data_ptr<int64_t>();
      TORCH_CHECK(h[0] == kHeaderMagic, "recv from rank ", src,
                  ": the message is not from torch_tpu's send (tag ", tag, ")");
      auto sent_type = static_cast<at::ScalarType>(h[1]);
      if (sent_type != dtype || h[3] != expected_bytes) {
        std::vector<at::Tensor> drain{at::empty({h[3]}, at::kByte)};
        gloo->recv(drain, src, tag)->wait();  // keeps the connection usable
        TORCH_CHECK(false, "recv from rank ", src, ": rank ", src, " sent a ", sent_type,
                    " tensor of ", h[2], " elements, but this rank receives into a ", dtype,
                    " tensor of ", numel, " elements");
      }
      std::vector<at::Tensor> payload_list{host_bytes};
      payload_work = gloo->recv(payload_list, src, tag);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(posting->mutex);
    posting->error = error;
    posting->payload_work = payload_work;
    posting->posted = true;
    posting->posted_cv.notify_all();
  }).detach();

  auto step = [posting, tensor, host](bool block) {
    WorkPtr payload_work;
    {
      std::unique_lock<std::mutex> lock(posting->mutex);
      if (!block && !posting->posted) return false;
      posting->posted_cv.wait(lock, [&] { return posting->posted; });
      if (posting->error) std::rethrow_exception(posting->error);
      payload_work = posting->payload_work;
    }
    if (!block && !payload_work->isCompleted()) return false;
    payload_work->wait();
    write_back(tensor, host);
    return true;
  };
  return c10::make_intrusive<SteppedWork>(rank_, c10d::OpType::RECV,
                                          std::vector<at::Tensor>{tensor}, step);
}

WorkPtr HostStagingEngine::barrier() {
  gloo_->barrier()->wait();
  return done(c10d::OpType::BARRIER, {});
}

at::Tensor HostStagingEngine::exchange_records(const at::Tensor& record) {
  at::Tensor in = record.to(at::kLong).contiguous();
  at::Tensor out = at::empty({size_, in.numel()}, at::kLong);
  at::Tensor out_flat = out.view({-1});
  gloo_->_allgather_base(out_flat, in)->wait();
  return out;
}

}  // namespace tpu::distributed
