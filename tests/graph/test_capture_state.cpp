// Capture state (Note [Capture state] in npugraph/kernel.hpp): what an op leaves with a captured
// launch, read back by captured_state() in the update that replaces it, and the vouch of an update
// launch that passes it back (check_update skipped for that launch only).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "npugraph/npugraph.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using ngtest::throws;

namespace {

// A kernel that writes its parameter into `*out`; its update check refuses every block (so an
// update gets through only when the check is skipped) and counts its calls.
struct Params {
  float* out;
  float value;
};
std::atomic<int> g_checks{0};
void write_value(const void* params, std::size_t, const ExecContext&) {
  Params p;
  std::memcpy(&p, params, sizeof p);
  *p.out = p.value;
}
std::string refuse_all(std::span<const std::byte>, std::span<const std::byte>) {
  ++g_checks;
  return "this kernel refuses every update it checks";
}
const KernelDef kWrite{.name = "write_value", .cpu = &write_value, .check_update = &refuse_all};
const KernelDef kOther{.name = "other_value", .cpu = &write_value};

struct Captured {
  float out = 0;
  std::shared_ptr<const int> state = std::make_shared<const int>(42);
  Graph graph;
  TaskGroupHandle handle;
  Stream update = Stream::create();

  Captured() {
    CaptureScope c(graph);
    const Stream s = current_stream();
    EXPECT_EQ(captured_state(s, kWrite), nullptr);  // capturing, not updating
    task_group_begin(s);
    const Params p{&out, 1.0f};
    launch(s, kWrite, std::as_bytes(std::span(&p, 1)), {}, state);
    handle = task_group_end(s);
  }
  float replayed() {
    graph.replay();
    device_synchronize();
    return out;
  }
};

TEST(CaptureState, TheUpdateThatReplacesTheTaskSeesItsState) {
  Captured c;
  EXPECT_EQ(captured_state(c.update, kWrite), nullptr);  // not updating
  task_update_begin(c.update, c.handle);
  EXPECT_EQ(captured_state(c.update, kWrite), c.state.get());
  EXPECT_EQ(captured_state(c.update, kOther), nullptr);  // the next task is not kOther's
  // Another thread's view of the update: null (the state is the updating thread's).
  const void* seen = &c;
  std::thread([&] { seen = captured_state(c.update, kWrite); }).join();
  EXPECT_EQ(seen, nullptr);
  task_update_abort(c.update);
  EXPECT_EQ(captured_state(c.update, kWrite), nullptr);
  // An eager launch ignores a state.
  float eager = 0;
  const Params p{&eager, 5.0f};
  launch(current_stream(), kWrite, std::as_bytes(std::span(&p, 1)), {}, c.state);
  device_synchronize();
  EXPECT_EQ(eager, 5.0f);
}

TEST(CaptureState, PassingTheStateBackVouchesForTheBlockAndSkipsTheCheck) {
  Captured c;
  ASSERT_EQ(c.replayed(), 1.0f);
  // Vouched (a non-owning pointer to the captured state): installed without check_update.
  const int before = g_checks.load();
  task_update_begin(c.update, c.handle);
  {
    StreamGuard on(c.update);
    const Params p{&c.out, 2.0f};
    launch(c.update, kWrite, std::as_bytes(std::span(&p, 1)), {},
           std::shared_ptr<const void>(std::shared_ptr<const void>(), c.state.get()));
  }
  task_update_end(c.update);
  EXPECT_EQ(g_checks.load(), before);
  EXPECT_EQ(c.replayed(), 2.0f);
  // Not vouched (no state, or another object): checked, and refused with the check's words.
  const auto other = std::make_shared<const int>(42);
  for (std::shared_ptr<const void> state : {std::shared_ptr<const void>(), std::shared_ptr<const void>(other)}) {
    task_update_begin(c.update, c.handle);
    StreamGuard on(c.update);
    const Params p{&c.out, 3.0f};
    EXPECT_TRUE(throws<StateError>(
        [&] { launch(c.update, kWrite, std::as_bytes(std::span(&p, 1)), {}, state); },
        {"cannot replace task 1 of", "this kernel refuses every update it checks",
         "nothing was installed"}));
    EXPECT_FALSE(c.update.is_updating());  // abandoned
  }
  EXPECT_EQ(g_checks.load(), before + 2);
  EXPECT_EQ(c.replayed(), 2.0f);  // the refused updates installed nothing
}

TEST(CaptureState, AVouchedLaunchWithoutUsesKeepsTheCapturedTensorsAlive) {
  // Captured with a tensor as a use; the caller then drops it: only the graph keeps it.
  auto graph = std::make_unique<Graph>();
  const std::shared_ptr<const int> state = std::make_shared<const int>(7);
  std::weak_ptr<Storage> storage;
  float* out = nullptr;
  TaskGroupHandle handle;
  {
    Tensor t = empty({1}, DType::f32);
    storage = t.storage();
    out = t.data_ptr<float>();
    CaptureScope c(*graph);
    const Stream s = current_stream();
    task_group_begin(s);
    const Params p{out, 1.0f};
    const Tensor* uses[] = {&t};
    launch(s, kWrite, std::as_bytes(std::span(&p, 1)), uses, state);
    handle = task_group_end(s);
  }
  ASSERT_FALSE(storage.expired());
  const Stream update = Stream::create();
  for (float v : {2.0f, 3.0f}) {  // vouched, no uses: installed, the task keeps the captured keep-alive
    task_update_begin(update, handle);
    {
      StreamGuard on(update);
      const Params p{out, v};
      launch(update, kWrite, std::as_bytes(std::span(&p, 1)), {},
             std::shared_ptr<const void>(std::shared_ptr<const void>(), state.get()));
    }
    task_update_end(update);
    graph->replay();
    device_synchronize();
    ASSERT_FALSE(storage.expired());
    EXPECT_EQ(*out, v);
  }
  graph.reset();
  update.synchronize();
  EXPECT_TRUE(storage.expired());  // nothing leaked: the graph held the last reference
}

}  // namespace
