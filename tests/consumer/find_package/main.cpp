// A user of npugraph, built as its own project against the installed package (find_package) or the
// source tree (add_subdirectory), with -Wall -Wextra -Wpedantic -Werror (tests/consumer/run.cmake).
// One attention call eager, then captured in a graph as a task group, replayed, updated to other
// values and replayed again; every output is checked. With one key per head the softmax weight is 1,
// so the attention output is the value tensor itself.
#include <cmath>
#include <cstdint>
#include <cstdio>

#include <npugraph/npugraph.hpp>

// The library's check macros stay inside the library (Note [Check macros are the library's own]).
#if defined(NG_CHECK_AS) || defined(NG_CHECK_ARG) || defined(NG_CHECK_STATE) || defined(NG_THROW)
#error "<npugraph/npugraph.hpp> defines the library's NG_* check macros in user code"
#endif

namespace ng = npugraph;

namespace {

ng::Tensor filled(const ng::Shape& shape, float first) {
  ng::Tensor t = ng::empty(shape, ng::f32);
  float* p = t.data_ptr<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = first + 0.25f * static_cast<float>(i % 16);
  return t;
}

bool close(const ng::Tensor& a, const ng::Tensor& b) {
  if (a.numel() != b.numel()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (std::fabs(a.data_ptr<float>()[i] - b.data_ptr<float>()[i]) > 1e-6f) return false;
  }
  return true;
}

int failures = 0;

void expect(bool ok, const char* what) {
  std::printf("%-40s %s\n", what, ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

}  // namespace

int main() {
  const ng::Shape shape{1, 4, 1, 8};  // BNSD: batch 1, 4 heads, 1 query / 1 key, head dim 8
  const ng::Tensor query = filled(shape, 0.5f);
  const ng::Tensor key = filled(shape, -1.0f);
  const ng::Tensor value = filled(shape, 2.0f);
  const ng::Tensor other_value = filled(shape, -3.0f);

  // Designated initialisers naming a few fields: no -Wmissing-field-initializers (FiaOptions).
  const ng::ops::FiaOptions options{.num_heads = 4, .scale = 0.5f, .input_layout = "BNSD"};

  ng::Tensor undefined;
  expect(!undefined.defined(), "a default Tensor is undefined");

  const ng::ops::FiaResult eager = ng::ops::fused_infer_attention_score(query, key, value, options);
  ng::device_synchronize();
  expect(close(eager.attention_out, value), "eager attention = value");

  ng::Graph graph;
  ng::TaskGroupHandle group;
  ng::Tensor workspace, out, lse;
  {
    ng::CaptureScope capture(graph);
    const ng::Stream stream = ng::current_stream();
    workspace = ng::ops::fia_max_workspace(query, key, value, options);
    out = ng::empty(shape, ng::f32);
    lse = ng::empty({1}, ng::f32);
    ng::task_group_begin(stream);
    ng::ops::fused_infer_attention_score_out(query, key, value, options, workspace, out, lse);
    group = ng::task_group_end(stream);
  }
  graph.replay();
  ng::device_synchronize();
  expect(close(out, value), "replay attention = value");

  const ng::Stream update_stream = ng::Stream::create();
  {
    ng::StreamGuard on(update_stream);
    ng::task_update_begin(update_stream, group);
    ng::ops::fused_infer_attention_score_out(query, key, other_value, options, workspace, out, lse);
    ng::task_update_end(update_stream);
  }
  update_stream.synchronize();
  graph.replay();
  ng::device_synchronize();
  expect(close(out, other_value), "replay after update = the new value");

  bool refused = false;
  try {
    ng::ops::fused_infer_attention_score(query, key, value, {.num_heads = 3, .input_layout = "BNSD"});
  } catch (const ng::ArgumentError& e) {
    refused = true;
    std::printf("  (ArgumentError: %s)\n", e.what());
  }
  expect(refused, "num_heads = 3 for 4 heads is refused");

  std::printf("npugraph consumer: %s\n", failures == 0 ? "all checks passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
