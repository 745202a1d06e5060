# npugraph — the two commands of a fresh Debian machine:
#   make demo   installs what is needed, builds, runs the seed example on the CPU backend
#   make test   builds and runs every test, then again under ASan + UBSan
#   make bench  runs every benchmark and rewrites the README's Performance section
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
PACKAGES := cmake make g++ libgtest-dev libgmock-dev libbenchmark-dev \
            python3-dev python3-pybind11 python3-numpy python3-pytest python3-torch \
            libhwy-dev libtbb-dev libopenblas0-pthread
PYTHON := /usr/bin/python3
CMAKE_COMMON := -DNPUGRAPH_WERROR=ON -DPython3_EXECUTABLE=$(PYTHON)

.PHONY: all setup build demo test test-release test-asan bench clean

all: build

# Idempotent: installs only what is missing (needs root or sudo the first time).
setup:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_COMMON) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/seed_example

test: test-release test-asan

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_COMMON) \
	  -DNPUGRAPH_SANITIZE=ON -DNPUGRAPH_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j$(JOBS)

# Benchmarks: every build/bench_* binary (Google Benchmark; medians of BENCH_REPS repetitions, or
# of the count BENCH_REPS_FOR gives that binary), then the Python benches; each writes its JSON into
# BENCH_OUT, and tools/perf_table.py renders bench/tables.py from them into README.md.
BENCH_OUT ?= $(BUILD)/bench-results
BENCH_REPS ?= 5
BENCH_REPS_FOR ?= bench_attention=3

bench: build
	@mkdir -p $(BENCH_OUT) && rm -f $(BENCH_OUT)/*.json
	@for b in $(BUILD)/bench_*; do \
	  [ -f "$$b" ] && [ -x "$$b" ] || continue; name=$$(basename "$$b"); reps=$(BENCH_REPS); \
	  for o in $(BENCH_REPS_FOR); do [ "$${o%%=*}" = "$$name" ] && reps=$${o#*=}; done; \
	  echo "== $$b (median of $$reps)"; \
	  "$$b" --benchmark_out=$(BENCH_OUT)/$$name.json --benchmark_out_format=json \
	    --benchmark_repetitions=$$reps --benchmark_report_aggregates_only=true || exit 1; \
	done
	PYTHONPATH=$(BUILD)/python $(PYTHON) bench/bench_python.py --out $(BENCH_OUT)/python.json
	$(PYTHON) bench/attention/torch_peer.py --out $(BENCH_OUT)/torch_attention.json
	$(PYTHON) tools/perf_table.py --results $(BENCH_OUT)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
