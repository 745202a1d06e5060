#!/usr/bin/env bash
# tools/gpu_check.sh — the one prepared script for the GPU machine (docs/backends.md, "Checking on
# a GPU"). Run from the repository root, with $OUT the folder whose contents come back:
#
#   tools/gpu_check.sh                       # uses ./build-cuda when it holds a build, else builds it
#   BUILD=build-x NPUGRAPH_GPU_CYCLES=10000 tools/gpu_check.sh
#
# It takes the carried build (or configures and builds one with every core), records the GPU and the
# toolkit, runs the GPU tests (ctest label gpu: the CudaGpu* suites, NPUGRAPH_GPU_CYCLES update ->
# replay cycles per order), the no-GPU CUDA checks for comparison (they must now report the
# device), and the GPU benchmarks (bench_cuda, and bench/cuda/torch_peer.py beside it), then
# writes summary.txt. Everything
# lands under $OUT; the exit status is 0 only when every step passed. It never resets or
# reconfigures the GPU.
set -u
OUT=${OUT:-$PWD/gpu-check-out}
BUILD=${BUILD:-build-cuda}
CYCLES=${NPUGRAPH_GPU_CYCLES:-10000}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
status=0
step() {  # step NAME COMMAND...: runs it, logs to $OUT/NAME.log, records pass/fail
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name: $*"
  if "$@" > "$OUT/$name.log" 2>&1; then echo "$name: PASS ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
  else echo "$name: FAIL rc $? ($((SECONDS - t0)) s), see $name.log" | tee -a "$OUT/summary.txt"; tail -40 "$OUT/$name.log"; status=1; fi
}
: > "$OUT/summary.txt"
date -u +"started %F %T UTC" | tee -a "$OUT/summary.txt"
git rev-parse HEAD 2>/dev/null | sed 's/^/commit /' | tee -a "$OUT/summary.txt"
step nvidia_smi nvidia-smi
step nvcc_version bash -c 'command -v nvcc && nvcc --version || /usr/local/cuda/bin/nvcc --version'

if [ ! -x "$BUILD/npugraph_tests" ]; then
  step configure cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DNPUGRAPH_CUDA=ON -DNPUGRAPH_WERROR=ON \
    -DNPUGRAPH_BUILD_PYTHON=OFF -DNPUGRAPH_BUILD_APPS=OFF -DNPUGRAPH_BUILD_EXAMPLES=OFF
  step build cmake --build "$BUILD" -j"$JOBS" --target npugraph_tests
  # The benchmarks need Google Benchmark on the machine: a failure here only skips them.
  cmake --build "$BUILD" -j"$JOBS" --target bench_cuda > "$OUT/build_bench.log" 2>&1 ||
    echo "bench_cuda not built (no Google Benchmark?): see build_bench.log" | tee -a "$OUT/summary.txt"
else
  echo "using the carried build $BUILD" | tee -a "$OUT/summary.txt"
fi
if [ ! -x "$BUILD/npugraph_tests" ]; then
  echo "no test binary: nothing more to run" | tee -a "$OUT/summary.txt"; exit 1
fi

# The GPU tests: ctest -L gpu when ctest can read the build's test list, else the binary directly.
export NPUGRAPH_GPU_CYCLES=$CYCLES
if [ -f "$BUILD/CTestTestfile.cmake" ] && command -v ctest > /dev/null; then
  step gpu_tests bash -c "cd '$BUILD' && ctest -L gpu --output-on-failure --timeout 900"
  cp "$BUILD/gpu_tests.xml" "$OUT/" 2>/dev/null
else
  step gpu_tests "$BUILD/npugraph_tests" --gtest_filter='CudaGpu*' --gtest_output="xml:$OUT/gpu_tests.xml"
fi
grep -h "SKIPPED\|Skipped\|no CUDA device" "$OUT/gpu_tests.log" > "$OUT/skips.txt" 2>/dev/null && {
  echo "WARNING: GPU tests skipped (see skips.txt): no device was found" | tee -a "$OUT/summary.txt"; status=1; }
step cuda_checks "$BUILD/npugraph_tests" --gtest_filter='CudaBackend*:BackendSeam*'
# The runtime and graph suites once more: they run on the cpu, but beside a live CUDA context.
step cpu_suites_beside_gpu "$BUILD/npugraph_tests" --gtest_filter='Graph*:Update*:Stream*:Event*' --gtest_brief=1

# GPU benchmarks: bench_cuda (bench/cuda/npugraph.cpp) beside PyTorch on the same GPU
# (bench/cuda/torch_peer.py); medians of 5 repetitions, JSON under $OUT.
found=0
for b in "$BUILD"/bench_cuda*; do
  [ -x "$b" ] || continue; found=1
  step "$(basename "$b")" "$b" --benchmark_out="$OUT/$(basename "$b").json" --benchmark_out_format=json \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
done
[ $found = 1 ] || echo "benchmarks: bench_cuda not built: its figures are not measured" | tee -a "$OUT/summary.txt"
step torch_peer python3 bench/cuda/torch_peer.py --out "$OUT/torch_cuda.json"
date -u +"ended %F %T UTC, status $status" | tee -a "$OUT/summary.txt"
exit $status
