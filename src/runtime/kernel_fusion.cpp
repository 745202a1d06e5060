// The registry of kernel fusions and the switch that turns fusing on and off (Note [Kernel fusion]
// in npugraph/kernel.hpp; the cpu graph backend plans the pairs, backends/cpu/fusion_plan.cpp).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"

namespace npugraph {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<const KernelFusion*> fusions;
};

Registry& registry() {
  static Registry r;  // function-local: ops register from their translation units' initialisers
  return r;
}

std::atomic<int> g_fusion{-1};  // -1: not yet read from the environment

}  // namespace

void register_kernel_fusion(const KernelFusion& fusion) {
  NG_CHECK_ARG(fusion.name && fusion.first && fusion.second && fusion.match && fusion.cpu,
               "register_kernel_fusion: fusion '", fusion.name ? fusion.name : "(null)",
               "': name, first, second, match and cpu must all be set");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const KernelFusion* f : r.fusions)
    NG_CHECK_ARG(f->first != fusion.first || f->second != fusion.second, "register_kernel_fusion: fusion '",
                 fusion.name, "': kernels '", fusion.first->name, "' then '", fusion.second->name,
                 "' already fuse as '", f->name, "'");
  r.fusions.push_back(&fusion);
}

const KernelFusion* find_kernel_fusion(const KernelDef& first, const KernelDef& second) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const KernelFusion* f : r.fusions)
    if (f->first == &first && f->second == &second) return f;
  return nullptr;
}

void set_kernel_fusion(bool on) { g_fusion.store(on ? 1 : 0); }

bool kernel_fusion() {
  int on = g_fusion.load(std::memory_order_relaxed);
  if (on >= 0) [[likely]]
    return on != 0;
  const char* env = std::getenv("NPUGRAPH_KERNEL_FUSION");
  const std::string v = env ? env : "";
  int parsed = 1;
  if (v == "0" || v == "off") parsed = 0;
  else if (!v.empty() && v != "1" && v != "on")
    std::fprintf(stderr, "npugraph: NPUGRAPH_KERNEL_FUSION = '%s': must be 0, 1, off or on (fusion stays on)\n",
                 v.c_str());
  int expected = -1;
  g_fusion.compare_exchange_strong(expected, parsed);
  return g_fusion.load() != 0;
}

}  // namespace npugraph
