# npugraph — the two commands of a fresh Debian machine:
#   make demo   installs what is needed, builds, runs the seed example on the CPU backend
#   make test   builds and runs every test, then again under ASan + UBSan
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
PACKAGES := cmake make g++ libgtest-dev libgmock-dev libbenchmark-dev \
            python3-dev python3-pybind11 python3-numpy python3-pytest python3-torch \
            libhwy-dev libtbb-dev
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

bench: build
	@for b in $(BUILD)/bench_*; do [ -x "$$b" ] && echo "== $$b" && "$$b" --benchmark_min_time=0.5; done
	PYTHONPATH=$(BUILD)/python $(PYTHON) bench/bench_python.py

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
