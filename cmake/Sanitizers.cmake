# Sanitizer builds (NPUGRAPH_SANITIZE):
#   OFF                   none (the default)
#   ON or address         AddressSanitizer + UndefinedBehaviorSanitizer (make test-asan)
#   thread                ThreadSanitizer (make test-tsan)
#   fuzzer                libFuzzer coverage + ASan + UBSan, for clang (make fuzz); the library
#                         and tests/fuzz/ harnesses are compiled with -fsanitize=fuzzer-no-link and
#                         the harness executables link -fsanitize=fuzzer (cmake/Fuzz.cmake)
# Sets NPUGRAPH_SANITIZE_KIND to "", "address", "thread" or "fuzzer".
string(TOLOWER "${NPUGRAPH_SANITIZE}" _ng_sanitize)
if(_ng_sanitize STREQUAL "" OR _ng_sanitize MATCHES "^(off|0|false|no|n)$")
  set(NPUGRAPH_SANITIZE_KIND "")
elseif(_ng_sanitize MATCHES "^(on|1|true|yes|y|address)$")
  set(NPUGRAPH_SANITIZE_KIND "address")
elseif(_ng_sanitize STREQUAL "thread" OR _ng_sanitize STREQUAL "fuzzer")
  set(NPUGRAPH_SANITIZE_KIND "${_ng_sanitize}")
else()
  message(FATAL_ERROR "NPUGRAPH_SANITIZE = ${NPUGRAPH_SANITIZE}: expected OFF, ON, address, "
                      "thread or fuzzer")
endif()

# Note [Sanitizer builds compile one SIMD target]
# A sanitizer build runs its kernels on the machine that builds it, so it compiles one Highway
# target, not one per ISA: NPUGRAPH_SANITIZE_ISA=haswell compiles everything with -march=haswell
# -maes and the kernels for that one static target (Highway's AVX2: AVX2, FMA, F16C, BMI2, AES),
# the code a test or a fuzz input runs on every x86 machine CI may get (AVX2 is the common ground;
# the Release build's parity and fast-path tests cover AVX-512 where it exists). Instrumenting one
# copy instead of two (AVX2 and the scalar fallback nothing ran) takes the largest SIMD source from
# 66 s to 29 s here. It also keeps every instruction VEX-encoded: at -O1 gcc inserts no vzeroupper,
# and SSE code after an AVX2 kernel on the same thread ran 15x slower (a CUDA-emulation test: 57 s
# instead of 4 s after an eager FIA call on its thread). AUTO (the default) picks haswell when this
# machine's CPU has those extensions (/proc/cpuinfo) and `dispatch` otherwise: the baseline and
# AVX2 with runtime dispatch. ctest cmake_sanitize_isa_option checks the choice.
set(NPUGRAPH_SANITIZE_ISA AUTO CACHE STRING
    "Sanitizer builds' SIMD code: AUTO, haswell (one static AVX2 target) or dispatch (baseline + AVX2)")
set(NPUGRAPH_SANITIZE_HWY_STATIC OFF)
set(NPUGRAPH_SANITIZE_HWY_DISABLED "(HWY_SSSE3|HWY_SSE4|HWY_AVX3|HWY_AVX3_DL)")
if(NPUGRAPH_SANITIZE_KIND)
  string(TOLOWER "${NPUGRAPH_SANITIZE_ISA}" _ng_isa)
  if(_ng_isa STREQUAL "auto")
    set(_ng_isa dispatch)
    if(EXISTS /proc/cpuinfo)
      file(STRINGS /proc/cpuinfo _ng_flags REGEX "^flags" LIMIT_COUNT 1)
      set(_ng_isa haswell)
      foreach(f avx2 fma f16c bmi1 bmi2 aes pclmulqdq movbe popcnt)
        if(NOT " ${_ng_flags} " MATCHES " ${f} ")
          set(_ng_isa dispatch)
        endif()
      endforeach()
    endif()
  endif()
  if(_ng_isa STREQUAL "haswell")
    # -maes: gcc 12's haswell leaves AES out, and Highway's AVX2 baseline needs it.
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=haswell> $<$<COMPILE_LANGUAGE:CXX>:-maes>)
    set(NPUGRAPH_SANITIZE_HWY_STATIC ON)
  elseif(NOT _ng_isa STREQUAL "dispatch")
    message(FATAL_ERROR "NPUGRAPH_SANITIZE_ISA = ${NPUGRAPH_SANITIZE_ISA}: expected AUTO, haswell "
                        "or dispatch")
  endif()
  message(STATUS
          "npugraph: sanitizer build SIMD code: ${_ng_isa} (NPUGRAPH_SANITIZE_ISA=${NPUGRAPH_SANITIZE_ISA})")
endif()

# Line tables only (-g1, after the build type's -g): stack traces keep file:line, and the
# instrumented build skips most of the debug information it spent its time writing.
if(NPUGRAPH_SANITIZE_KIND)
  add_compile_options(-g1)
endif()

if(NPUGRAPH_SANITIZE_KIND STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(NPUGRAPH_SANITIZE_KIND STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NPUGRAPH_SANITIZE_KIND STREQUAL "fuzzer")
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "NPUGRAPH_SANITIZE=fuzzer needs clang (libFuzzer), not "
                        "${CMAKE_CXX_COMPILER_ID}: configure with -DCMAKE_CXX_COMPILER=clang++-16")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
