// send and recv of tpu tensors as XLA programs, for the xla collective engine. A send
// from rank a to rank b and the receive that matches it at b are one program: a
// collective_permute of the message's bytes over the two devices [a's, b's] (replica 0
// sends to replica 1), which each side launches on its own device with the same launch
// id. The n-th send a -> b on a tag meets the n-th receive b <- a on that tag, so the id
// comes from (a's device, b's device, tag, n), counted on both sides.
//
// Before launching, the two sides swap a small header over the control engine (gloo):
// a message whose dtype or size the receiver does not expect is an error on both ranks,
// never a launch that would wait for a peer that will not come or overrun a buffer.
//
// XLA runs a collective in the launching thread until the peer arrives, so each message
// is launched on a thread of its own and the returned Work finishes it: a ring of
// isend/irecv (batch_isend_irecv) must not wait on its sends before posting its receives.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "distributed/collective_engine.h"

namespace tpu::distributed {

class XlaPointToPoint {
 public:
  // control: carries the headers (it must outlive this); device: this rank's tpu device
  // index; device_ids: the PJRT device id of every rank of the group, by group rank.
  XlaPointToPoint(CollectiveEngine& control, int rank, int device, std::vector<int64_t> device_ids);

  // Whether a message on `tag` can go this way (the headers need a tag of their own).
  static bool serves_tag(int tag);

  // `tensor` is a tpu tensor (any strided view, any tpu device); peer is another group rank.
  WorkPtr send(const at::Tensor& tensor, int dst, int tag);
  WorkPtr recv(const at::Tensor& tensor, int src, int tag);

 private:
  struct Message;
  WorkPtr start(const at::Tensor& tensor, int peer, int tag, bool sending);
  // The launch id of the next message src -> dst on `tag` (group ranks).
  int next_launch_id(int src, int dst, int tag);

  CollectiveEngine& control_;
  int rank_;
  int device_;
  std::vector<int64_t> device_ids_;
  std::mutex count_mutex_;
  std::map<std::tuple<int, int, int>, int64_t> counts_;  // messages so far per (src, dst, tag)
};

}  // namespace tpu::distributed
