#!/usr/bin/env bash
# Runs torch_npu's own graph tests, unmodified, under the shim (python -m npugraph.compat) with
# each Python given, and prints one line per test: its result per interpreter.
#   tools/torch_npu_tests.sh DIR PYTHON...
# DIR holds the test files as Ascend/pytorch has them (test/npu/test_aclgraph_*.py,
# test/npu/test_npugraph_handler.py, test/test_npu.py); nothing of theirs is kept in this repository.
# PYTHONPATH must name npugraph (build/python, or an installed package).
set -uo pipefail
dir=$1; shift
out=$(mktemp -d)
for py in "$@"; do
  tag=$(basename "$(dirname "$(dirname "$py")")")
  for f in "$dir"/test_aclgraph_*.py "$dir"/test_npugraph_handler.py "$dir"/test_npu.py; do
    [ -f "$f" ] || continue
    (cd "$dir" && timeout -k 5 600 "$py" -m npugraph.compat "$f" -v > "$out/$tag.$(basename "$f").log" 2>&1)
    echo "== $tag $(basename "$f"): $(tail -1 "$out/$tag.$(basename "$f").log")"
  done
done
echo "logs: $out"
