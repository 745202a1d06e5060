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

# Highway targets the sanitizer builds leave out (CMakeLists.txt): they keep the baseline and AVX2,
# so that a test or a fuzz input runs the same kernel code on every x86 machine CI may get (AVX2 is
# the common ground; the Release build's parity and fast-path tests cover AVX-512 where it exists)
# and each SIMD source is instrumented twice instead of four times (make test's time budget).
set(NPUGRAPH_SANITIZE_HWY_DISABLED "(HWY_SSSE3|HWY_SSE4|HWY_AVX3|HWY_AVX3_DL)")

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
