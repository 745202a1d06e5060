// The seed example (torch_npu.npu.graph_task_group_end's usage page) in C++, line by line:
// eager FIA with actual_seq_lengths [100]; capture with ExternalEvent wait/reset, a task group around
// FIA .out with [29]; update on a second stream to [100] and record; replay; compare bitwise.
#include <cstdio>
#include <cstring>
#include <random>

#include "npugraph/npugraph.hpp"

namespace ng = npugraph;

namespace {
ng::Tensor randn(ng::Shape shape, std::mt19937& rng) {
  ng::Tensor t = ng::empty(shape, ng::f16);
  std::normal_distribution<float> dist;
  auto* p = t.data_ptr<ng::half>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = ng::half(dist(rng));
  return t;
}
}  // namespace

int main() {
  std::mt19937 rng(0);
  const std::vector<std::int64_t> length = {29};
  const std::vector<std::int64_t> length_new = {100};
  const double scale = 1 / 0.0078125;
  ng::Tensor query = randn({1, 32, 1, 128}, rng);
  ng::Tensor key = randn({1, 32, 1, 128}, rng);
  ng::Tensor value = randn({1, 32, 1, 128}, rng);

  ng::Stream update_stream = ng::Stream::create();
  ng::TaskGroupHandle handle;
  ng::ExternalEvent event("seed_event");
  ng::Tensor workspace, output, softmax_lse;

  ng::ops::FiaOptions options{.actual_seq_lengths = length_new, .num_heads = 32, .scale = scale,
                              .pre_tokens = 65535, .next_tokens = 65535, .input_layout = "BNSD",
                              .softmax_lse_flag = false};
  ng::ops::FiaResult res = ng::ops::fused_infer_attention_score(query, key, value, options);
  ng::device_synchronize();

  ng::Graph g;
  {
    ng::CaptureScope capture(g);
    ng::Stream stream = ng::current_stream();
    ng::ops::FiaOptions captured = options;
    captured.actual_seq_lengths = length;
    workspace = ng::ops::fia_max_workspace(query, key, value, captured);
    output = ng::empty({1, 32, 1, 128}, ng::f16);
    softmax_lse = ng::empty({1}, ng::f16);

    event.wait(stream);
    event.reset(stream);
    ng::task_group_begin(stream);
    ng::ops::fused_infer_attention_score_out(query, key, value, captured, workspace, output, softmax_lse);
    handle = ng::task_group_end(stream);
  }

  {
    ng::StreamGuard on(update_stream);
    ng::task_update_begin(update_stream, handle);
    ng::ops::fused_infer_attention_score_out(query, key, value, options, workspace, output, softmax_lse);
    ng::task_update_end(update_stream);
    event.record(update_stream);
  }

  g.replay();
  ng::device_synchronize();

  std::printf("res[0][0][0][:4]: %.4f %.4f %.4f %.4f\n", static_cast<float>(res.attention_out.data_ptr<ng::half>()[0]),
              static_cast<float>(res.attention_out.data_ptr<ng::half>()[1]),
              static_cast<float>(res.attention_out.data_ptr<ng::half>()[2]),
              static_cast<float>(res.attention_out.data_ptr<ng::half>()[3]));
  std::printf("output[0][0][0][:4]: %.4f %.4f %.4f %.4f\n", static_cast<float>(output.data_ptr<ng::half>()[0]),
              static_cast<float>(output.data_ptr<ng::half>()[1]), static_cast<float>(output.data_ptr<ng::half>()[2]),
              static_cast<float>(output.data_ptr<ng::half>()[3]));
  const bool equal = output.nbytes() == res.attention_out.nbytes() &&
                     std::memcmp(output.data(), res.attention_out.data(), output.nbytes()) == 0;
  std::printf("equal: %s\n", equal ? "true" : "false");
  return equal ? 0 : 1;
}
