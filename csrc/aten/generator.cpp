#include "aten/generator.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <random>

#include "aten/device.h"

namespace tpu::aten {

namespace {

constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // the value CUDA starts from

class TpuGenerator final : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t current_seed() const override { return seed_; }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t seed() override {
    uint64_t random = std::random_device{}();
    random = (random << 32) | std::random_device{}();
    set_current_seed(random);
    return random;
  }

  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(state.data_ptr(), &seed_, 8);
    std::memcpy(static_cast<char*>(state.data_ptr()) + 8, &offset_, 8);
    return state.getIntrusivePtr();
  }

  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                "a tpu RNG state is a torch.uint8 tensor of 16 elements, got ", state.numel(),
                " elements of ", state.dtype());
    std::memcpy(&seed_, state.data(), 8);
    std::memcpy(&offset_, static_cast<const char*>(state.data()) + 8, 8);
  }

 private:
  TpuGenerator* clone_impl() const override {
    auto* copy = new TpuGenerator(device().index());
    copy->seed_ = seed_;
    copy->offset_ = offset_;
    return copy;
  }

  uint64_t seed_ = kDefaultSeed;
  uint64_t offset_ = 0;
};

std::mutex mutex;
std::deque<at::Generator> defaults;  // deque: references stay valid as it grows

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mutex);
  while (static_cast<int>(defaults.size()) <= device) {
    defaults.push_back(
        at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(defaults.size())));
  }
  return defaults[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  check_device_index(device);
  return at::make_generator<TpuGenerator>(device);
}

namespace {
thread_local std::vector<at::Generator>* random_key_log = nullptr;
}  // namespace

void log_random_keys(std::vector<at::Generator>* log) { random_key_log = log; }

std::array<uint64_t, 2> next_random_key(const std::optional<at::Generator>& generator,
                                        c10::DeviceIndex device) {
  at::Generator source =
      generator.has_value() && generator->defined() ? *generator : default_generator(device);
  if (random_key_log != nullptr) random_key_log->push_back(source);
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1,
              "Expected a 'tpu' device type for generator but found '", source.device().type(),
              "'");
  std::lock_guard<std::mutex> lock(source.mutex());
  auto* impl = at::check_generator<TpuGenerator>(source);
  std::array<uint64_t, 2> key{impl->current_seed(), impl->get_offset()};
  impl->set_offset(key[1] + 1);
  return key;
}

}  // namespace tpu::aten
