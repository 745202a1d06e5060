// llm::TensorParallel on npugraph::dist (MPI): what npugraph-generate --tp N and the tensor-parallel
// decode tests (tests/dist/tp/) give the engine. It lives above both layers: src/llm never links MPI,
// and src/dist does not know the engine (tools/check_layers.py).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "npugraph/dist.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/tensor_parallel.hpp"

namespace npugraph::apps {

class MpiTensorParallel final : public llm::TensorParallel {
 public:
  explicit MpiTensorParallel(dist::Communicator comm) : comm_(std::move(comm)) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  // dist::all_reduce on the current stream (the engine's runner stream): eager, or a graph task.
  void all_reduce(const Tensor& x) override { dist::all_reduce(comm_, x); }
  const dist::Communicator& comm() const { return comm_; }

 private:
  dist::Communicator comm_;
};

// The rule for --tp: it must be the number of MPI processes. Returns the message for a bad value
// ("" when it is good); the model's own rules (heads, FFN, blocks) are the engine's (shard_of).
inline std::string check_tp_size(std::int64_t tp, int processes) {
  if (tp == processes) return "";
  return "--tp " + std::to_string(tp) + ": must equal the number of MPI processes (" + std::to_string(processes) +
         "; run `mpirun -np " + std::to_string(tp) + " npugraph-generate --tp " + std::to_string(tp) + " ...`)";
}

}  // namespace npugraph::apps
