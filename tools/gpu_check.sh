#!/usr/bin/env bash
# tools/gpu_check.sh — the one prepared script for the GPU machine (docs/backends.md, "Checking on
# a GPU"). Run from the repository root, with $OUT the folder whose contents come back:
#
#   tools/gpu_check.sh prepare               # here: libraries the carried build needs -> build-cuda/
#   tools/gpu_check.sh                       # there: uses ./build-cuda when it holds a build, else builds
#   BUILD=build-x NPUGRAPH_GPU_CYCLES=10000 tools/gpu_check.sh
#
# It takes the carried build (or configures and builds one with every core), records the GPU and the
# toolkit, runs the GPU tests (the CudaGpu* suites of ctest label gpu, NPUGRAPH_GPU_CYCLES update ->
# replay cycles per order; CudaGpuFia*: FIA parity with the CPU op and eager vs replay vs update
# bitwise), the no-GPU CUDA checks for comparison (they must now report the device; FiaCuda*: the
# host emulation of the FIA kernels), and the GPU benchmarks (bench_cuda with BM_Cuda_FiaDecode,
# and bench/cuda/torch_peer.py beside it with BM_Torch_SdpaDecode), then
# writes summary.txt. Everything
# lands under $OUT; the exit status is 0 only when every step passed. It never resets or
# reconfigures the GPU.
set -u
OUT=${OUT:-$PWD/gpu-check-out}
BUILD=${BUILD:-build-cuda}
CYCLES=${NPUGRAPH_GPU_CYCLES:-10000}
JOBS=${JOBS:-$(nproc)}

# `tools/gpu_check.sh prepare` (here, before carrying $BUILD to the GPU machine): copies the shared
# libraries the binaries need beyond the C/C++ runtime (Highway's libhwy) into $BUILD/carried-libs,
# which the run below puts on LD_LIBRARY_PATH. cudart is linked statically; the driver is the GPU
# machine's own.
if [ "${1:-}" = prepare ]; then
  mkdir -p "$BUILD/carried-libs"
  for bin in "$BUILD/npugraph_tests" "$BUILD/bench_cuda"; do
    [ -x "$bin" ] || continue
    ldd "$bin" | awk '$3 ~ /^\// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
      while read -r lib; do cp -L "$lib" "$BUILD/carried-libs/"; done
  done
  ls -la "$BUILD/carried-libs"
  exit 0
fi
export LD_LIBRARY_PATH="$PWD/$BUILD/carried-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
  # The NCCL collectives' tests need MPI on the machine: a failure here only skips them.
  cmake --build "$BUILD" -j"$JOBS" --target npugraph_dist_tests > "$OUT/build_dist.log" 2>&1 ||
    echo "npugraph_dist_tests not built (no MPI or NCCL?): see build_dist.log" | tee -a "$OUT/summary.txt"
else
  echo "using the carried build $BUILD" | tee -a "$OUT/summary.txt"
fi
if [ ! -x "$BUILD/npugraph_tests" ]; then
  echo "no test binary: nothing more to run" | tee -a "$OUT/summary.txt"; exit 1
fi

# The GPU tests (what ctest -L gpu runs), by the binary itself: a carried build's ctest files hold
# the absolute paths of the machine it was built on.
export NPUGRAPH_GPU_CYCLES=$CYCLES
step gpu_tests "$BUILD/npugraph_tests" --gtest_filter='CudaGpu*' --gtest_output="xml:$OUT/gpu_tests.xml"
# A skipped GPU test means the device was not found: that run proves nothing, so it fails.
skipped=$(grep -o 'result="skipped"' "$OUT/gpu_tests.xml" 2>/dev/null | wc -l)
ran=$(grep -o 'result="completed"' "$OUT/gpu_tests.xml" 2>/dev/null | wc -l)
echo "gpu tests: $ran ran, $skipped skipped" | tee -a "$OUT/summary.txt"
if [ "$skipped" -gt 0 ] || [ "$ran" -eq 0 ]; then
  grep -A2 'result="skipped"' "$OUT/gpu_tests.xml" > "$OUT/skips.txt" 2>/dev/null
  echo "FAIL: GPU tests skipped or none ran (see skips.txt): no CUDA device was found" | tee -a "$OUT/summary.txt"
  status=1
fi
step cuda_checks "$BUILD/npugraph_tests" --gtest_filter='CudaBackend*:BackendSeam*:FiaCuda*'
# The runtime and graph suites once more: they run on the cpu, but beside a live CUDA context.
step cpu_suites_beside_gpu "$BUILD/npugraph_tests" --gtest_brief=1 \
  --gtest_filter='Capture*:GraphDef*:ReplayOrder*:Seed*:GroupTest*:TaskGroupErrors*:BatchTest*:LaunchOrderUpdate*:StreamOrderUpdate*:ExternalEvent*:Stalls*:ElementwiseUpdate*'

# npugraph::dist on NCCL, one rank (one GPU allows no more: docs/dist.md, "On NCCL"): DistNccl*,
# whose GPU tests must run, not skip. Needs mpirun here and a build with NCCL.
if [ -x "$BUILD/npugraph_dist_tests" ] && command -v mpirun > /dev/null; then
  step dist_nccl_np1 mpirun -np 1 --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
    --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
    "$BUILD/npugraph_dist_tests" --gtest_filter='DistNccl*' --gtest_output="xml:$OUT/dist_nccl.xml"
  nskip=$(grep -o 'result="skipped"' "$OUT/dist_nccl.xml" 2>/dev/null | wc -l)
  echo "dist NCCL tests (1 rank): $nskip skipped (2 expected: the no-GPU refusal and the 2-rank timeout; more: no NCCL or no device)" | tee -a "$OUT/summary.txt"
else
  echo "dist NCCL tests: not run (no npugraph_dist_tests in $BUILD, or no mpirun on this machine)" | tee -a "$OUT/summary.txt"
fi

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
