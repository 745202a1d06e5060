#!/usr/bin/env bash
# Runs torch_npu's own graph tests, unmodified, under the shim (python -m npugraph.compat) with
# each Python given, and prints one line per test: its result per interpreter.
#   tools/torch_npu_tests.sh DIR PYTHON...
# DIR holds the test files as Ascend/pytorch has them (test/npu/test_aclgraph_*.py,
# test/npu/test_npugraph_handler.py, test/test_npu.py); nothing of theirs is kept in this repository.
# PYTHONPATH must name npugraph (build/python, or an installed package).
# test_npu.py runs only its graph tests (-k graph), on the real npu device where the torch has it
# (NPUGRAPH_NPU_DEVICE=1, torch >= 2.3): without a PrivateUse1 device named npu it runs nothing
# (its TestCase becomes NoTest when torch's TEST_PRIVATEUSE1 is False).
set -uo pipefail
dir=$1; shift
out=$(mktemp -d)
for py in "$@"; do
  tag=$(basename "$(dirname "$(dirname "$py")")")
  for f in "$dir"/test_aclgraph_*.py "$dir"/test_npugraph_handler.py "$dir"/test_npu.py; do
    [ -f "$f" ] || continue
    env=() args=()
    if [ "$(basename "$f")" = test_npu.py ]; then
      args=(-k graph)
      if "$py" -c "import sys, torch, npugraph._npu_device as d; sys.exit(0 if d.available(torch) else 1)" 2>/dev/null; then
        env=(NPUGRAPH_NPU_DEVICE=1)
      fi
    fi
    (cd "$dir" && env "${env[@]}" timeout -k 5 600 "$py" -m npugraph.compat "$f" -v "${args[@]}" \
       > "$out/$tag.$(basename "$f").log" 2>&1)
    echo "== $tag $(basename "$f"): $(tail -1 "$out/$tag.$(basename "$f").log")"
  done
done
echo "logs: $out"
