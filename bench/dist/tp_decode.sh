#!/bin/sh
# Tensor-parallel decode against one process (docs/dist.md, "Tensor-parallel decode of SmolLM2"):
# decode tokens/s of npugraph-generate in graph mode, batch 1, for one process (all cores, and one
# thread) and for --tp 2 / --tp 3 under mpirun (one thread per rank, and --tp 2 with two), ROUNDS
# rounds interleaved so that the machine's load hits every configuration alike. Run by hand:
#
#   bench/dist/tp_decode.sh [BUILD_DIR] [ROUNDS] [TOKENS]
#
# Prints one line per run (the summary's graph row) and, per configuration, the best and the median
# decode tokens/s.
set -eu
BUILD=${1:-build}
ROUNDS=${2:-5}
TOKENS=${3:-128}
GEN="$BUILD/npugraph-generate"
MPI_FLAGS="--allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
PROMPT="Write a short story about a robot who learns to paint."
CONFIGS="1:0 1:1 2:1 3:1 2:2"  # processes:threads (threads 0: every core)
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT

for round in $(seq "$ROUNDS"); do
  echo "round $round: $(uptime | sed 's/.*load/load/')"
  for c in $CONFIGS; do
    np=${c%:*}
    threads=${c#*:}
    if [ "$np" = 1 ]; then
      out=$("$GEN" --prompt "$PROMPT" --max-tokens "$TOKENS" --mode graph --threads "$threads" 2>&1)
    else
      # shellcheck disable=SC2086
      out=$(mpirun -np "$np" $MPI_FLAGS "$GEN" --tp "$np" --prompt "$PROMPT" --max-tokens "$TOKENS" \
            --mode graph --threads "$threads" 2>&1)
    fi
    row=$(echo "$out" | grep '^graph ' || true)
    check=$(echo "$out" | grep '^tensor parallel' || true)
    echo "  processes $np threads $threads: $row  $check"
    echo "$np:$threads $(echo "$row" | awk '{print $3}')" >> "$RESULTS"
  done
done

echo "decode tokens/s over $ROUNDS rounds (best, median):"
for c in $CONFIGS; do
  grep "^$c " "$RESULTS" | awk '{print $2}' | sort -n | awk -v c="$c" '
    { v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
          split(c, p, ":"); printf "  processes %s threads %s: best %.1f, median %.1f\n", p[1], p[2], v[NR], m }'
done
