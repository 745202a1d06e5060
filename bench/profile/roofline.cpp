// The roofline probes of bench_attention (DRAM read bandwidth, fp32 FMA peak), compiled into this
// binary from their one source so every benchmark measures the machine the same way.
#include "attention/roofline.cpp"  // NOLINT(bugprone-suspicious-include)
