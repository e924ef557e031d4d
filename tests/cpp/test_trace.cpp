// runtime::ProgramTrace (what torch.profiler shows) and runtime::Marker (torch.tpu.Event).
#include <gtest/gtest.h>

#include "hlo/builder.h"
#include "plugin_path.h"
#include "runtime/marker.h"
#include "runtime/program_cache.h"
#include "runtime/program_trace.h"

namespace tpu::runtime {
namespace {

using tpu::testing::shared_client;

// Runs x -> tanh(x @ x) on a 64x64 input; returns the output buffers.
std::vector<pjrt::BufferPtr> run_program(ProgramCache& cache) {
  hlo::Builder b;
  hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::F32, {64, 64}});
  hlo::Value y = b.dot_general(x, x, {}, {}, {1}, {0}, hlo::ElementType::F32);
  auto executable = cache.get(b.module_text({b.unary("tanh", y)}));
  std::vector<float> data(64 * 64, 0.01f);
  pjrt::BufferPtr input =
      shared_client().buffer_from_host(data.data(), PJRT_Buffer_Type_F32, {64, 64}, 0);
  return executable->execute({input->get()}, shared_client().device(0));
}

TEST(ProgramTrace, RecordsRunsOnlyWhileRecording) {
  ProgramCache cache(shared_client());
  ProgramTrace& trace = program_trace();
  {
    ProfiledRun before("ignored", 0);
    before.done(run_program(cache));
  }
  trace.start();
  for (int i = 0; i < 3; ++i) {
    ProfiledRun run("tanh_mm", 0);
    run.done(run_program(cache));
  }
  trace.stop();
  {
    ProfiledRun after("ignored", 0);
    after.done(run_program(cache));
  }
  std::vector<ProgramRun> runs = trace.take();
  ASSERT_EQ(runs.size(), 3u);
  int64_t total = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].name, "tanh_mm");
    EXPECT_EQ(runs[i].device, 0);
    EXPECT_LE(runs[i].start_ns, runs[i].end_ns);
    // Queueing is not counted: no earlier run ends inside this one.
    for (size_t j = 0; j < i; ++j) {
      EXPECT_TRUE(runs[j].end_ns <= runs[i].start_ns || runs[j].end_ns > runs[i].end_ns);
    }
    total += runs[i].end_ns - runs[i].start_ns;
  }
  EXPECT_GT(total, 0);
  EXPECT_TRUE(trace.take().empty());
}

TEST(Marker, CompletesAfterTheWorkPendingAtRecord) {
  ProgramCache cache(shared_client());
  Marker empty({});
  EXPECT_TRUE(empty.query());
  std::vector<pjrt::BufferPtr> outputs = run_program(cache);
  Marker start({});
  Marker end(outputs);
  end.wait();
  EXPECT_TRUE(end.query());
  EXPECT_GE(end.completed_ns(), start.completed_ns());
  for (const auto& output : outputs) EXPECT_TRUE(output->ready_event()->is_ready());
}

}  // namespace
}  // namespace tpu::runtime
