# ctest cmake_sanitize_isa_option (cmake/Sanitizers.cmake): configures an ASan build of the project
# in scratch folders and checks that a bad NPUGRAPH_SANITIZE_ISA names the choices, that `dispatch`
# is taken as given, and that AUTO picks haswell exactly when this machine's CPU has the extensions
# Highway's static AVX2 target needs. Configure only: nothing is compiled.
set(common -DNPUGRAPH_SANITIZE=ON -DNPUGRAPH_BUILD_TESTS=OFF -DNPUGRAPH_BUILD_BENCH=OFF
           -DNPUGRAPH_BUILD_EXAMPLES=OFF -DNPUGRAPH_BUILD_PYTHON=OFF -DNPUGRAPH_BUILD_APPS=OFF
           -DNPUGRAPH_INSTALL=OFF -DNPUGRAPH_CUDA=OFF -DNPUGRAPH_MPI=OFF)
include(${CMAKE_CURRENT_LIST_DIR}/ConfigureCheck.cmake)
file(REMOVE_RECURSE ${WORK})

configure_expect(bad fail "NPUGRAPH_SANITIZE_ISA = avx9: expected AUTO, haswell or dispatch"
                 "NPUGRAPH_SANITIZE_ISA=avx9" ${common} -DNPUGRAPH_SANITIZE_ISA=avx9)
configure_expect(dispatch ok "sanitizer build SIMD code: dispatch \\(NPUGRAPH_SANITIZE_ISA=dispatch\\)"
                 "NPUGRAPH_SANITIZE_ISA=dispatch" ${common} -DNPUGRAPH_SANITIZE_ISA=dispatch)

# AUTO: haswell iff every flag is in /proc/cpuinfo (read here independently of Sanitizers.cmake).
set(want dispatch)
if(EXISTS /proc/cpuinfo)
  file(READ /proc/cpuinfo info)
  string(REGEX MATCH "flags[^\n]*" flags "${info}")
  set(want haswell)
  foreach(f avx2 fma f16c bmi1 bmi2 aes pclmulqdq movbe popcnt)
    string(REGEX MATCH "[ \t]${f}( |$)" hit "${flags}")
    if(NOT hit)
      set(want dispatch)
    endif()
  endforeach()
endif()
configure_expect(auto ok "sanitizer build SIMD code: ${want} \\(NPUGRAPH_SANITIZE_ISA=AUTO\\)"
                 "NPUGRAPH_SANITIZE_ISA=AUTO on this CPU (${want})" ${common})
file(REMOVE_RECURSE ${WORK})
message(STATUS "NPUGRAPH_SANITIZE_ISA: a bad value fails clearly, dispatch is kept, AUTO chose ${want}")
