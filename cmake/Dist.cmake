# npugraph::dist (include/npugraph/dist.hpp, src/dist/): collectives on MPI, built when MPI is found
# (docs/dist.md). NPUGRAPH_MPI: AUTO (build it when find_package(MPI) finds MPI for C++; the C API is used), ON
# (required), OFF (never). Its tests (tests/dist/) run under mpirun -np 2 and -np 3 from ctest; the
# benchmark (bench/dist/) is a timing program run by hand under mpirun.
set(NPUGRAPH_MPI AUTO CACHE STRING "Build npugraph::dist on MPI: AUTO, ON or OFF")
set_property(CACHE NPUGRAPH_MPI PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${NPUGRAPH_MPI}" _ng_mpi)
if(NOT _ng_mpi MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "NPUGRAPH_MPI = ${NPUGRAPH_MPI}: must be AUTO, ON or OFF")
endif()

set(NPUGRAPH_DIST_BUILT OFF)
# libFuzzer builds have no use for it; the other builds take it when MPI is there.
if(NOT _ng_mpi STREQUAL "OFF" AND NOT NPUGRAPH_SANITIZE_KIND STREQUAL "fuzzer")
  # The C API from C++: no deprecated MPI C++ bindings (project languages: CXX only).
  set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "npugraph uses MPI's C API")
  if(_ng_mpi STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI QUIET COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(NPUGRAPH_DIST_BUILT ON)
  endif()
endif()
message(STATUS "npugraph::dist (MPI): ${NPUGRAPH_DIST_BUILT} (NPUGRAPH_MPI=${NPUGRAPH_MPI})")
# NCCL on the CUDA backend (NPUGRAPH_NCCL=AUTO|ON|OFF): sets NPUGRAPH_HAVE_NCCL.
include(${CMAKE_CURRENT_LIST_DIR}/Nccl.cmake)

# The flags mpirun needs in CI's container as root on 2 cores (docs/dist.md, "Running"): root
# allowed, more ranks than cores, shared memory between ranks without ptrace-based single copy.
set(NPUGRAPH_MPIEXEC_FLAGS --allow-run-as-root --oversubscribe --bind-to none
    --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism none
    CACHE STRING "Flags mpirun gets before the program (the dist tests)")

if(NPUGRAPH_DIST_BUILT)
  file(GLOB NPUGRAPH_DIST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/dist/*.cpp)
  add_library(npugraph_dist STATIC ${NPUGRAPH_DIST_SOURCES})
  add_library(npugraph::dist ALIAS npugraph_dist)
  target_include_directories(npugraph_dist PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_compile_definitions(npugraph_dist PRIVATE NPUGRAPH_INTERNAL_CHECKS)
  target_link_libraries(npugraph_dist PUBLIC npugraph MPI::MPI_CXX PRIVATE $<BUILD_INTERFACE:npugraph_warnings>)
  # Without NCCL the NCCL files compile to the refusal (Communicator::nccl throws UnsupportedError).
  # With it, libnccl is not linked but loaded by the first Communicator::nccl (src/dist/nccl_api.hpp,
  # Note [NCCL is loaded when first used]): binaries with npugraph::dist start without it.
  target_compile_definitions(npugraph_dist PRIVATE NPUGRAPH_HAVE_NCCL=$<BOOL:${NPUGRAPH_HAVE_NCCL}>)
  if(NPUGRAPH_HAVE_NCCL)
    target_include_directories(npugraph_dist PRIVATE ${NPUGRAPH_NCCL_INCLUDE_DIR})
    target_compile_definitions(npugraph_dist PRIVATE NPUGRAPH_NCCL_LIBRARY_PATH="${NPUGRAPH_NCCL_LIBRARY}")
    target_link_libraries(npugraph_dist PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS})
  endif()
  # Inside another project it is built only when something links it.
  if(NOT PROJECT_IS_TOP_LEVEL)
    set_target_properties(npugraph_dist PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()

  # The tests' environment: a short default deadline, so that a rank that fails an assertion and
  # skips a collective cannot keep the others waiting long; Open MPI's leaks are not ours under ASan.
  set(_ng_dist_env "NPUGRAPH_DIST_TIMEOUT_S=20" "OMPI_MCA_rmaps_base_oversubscribe=1")
  if(NPUGRAPH_SANITIZE_KIND)
    list(APPEND _ng_dist_env "ASAN_OPTIONS=detect_leaks=0")
  endif()
  if(NPUGRAPH_BUILD_TESTS AND GTest_FOUND)
    file(GLOB NPUGRAPH_DIST_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/dist/*.cpp)
    add_executable(npugraph_dist_tests ${NPUGRAPH_DIST_TEST_SOURCES}
                   ${CMAKE_CURRENT_SOURCE_DIR}/tests/support/host_tensors.cpp
                   ${CMAKE_CURRENT_SOURCE_DIR}/tests/support/bitwise.cpp)
    target_include_directories(npugraph_dist_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src
                               ${CMAKE_CURRENT_SOURCE_DIR}/tests)
    target_link_libraries(npugraph_dist_tests PRIVATE npugraph_dist npugraph_warnings GTest::gtest)
    # tests/dist/test_nccl.cpp reads the private NCCL state (src/dist/nccl_state.hpp) too.
    target_compile_definitions(npugraph_dist_tests PRIVATE NPUGRAPH_BUILT_WITH_CUDA=$<BOOL:${NPUGRAPH_HAVE_CUDA}>
                               NPUGRAPH_BUILT_WITH_NCCL=$<BOOL:${NPUGRAPH_HAVE_NCCL}>
                               NPUGRAPH_HAVE_NCCL=$<BOOL:${NPUGRAPH_HAVE_NCCL}>)
    if(NPUGRAPH_HAVE_NCCL)
      target_include_directories(npugraph_dist_tests PRIVATE ${NPUGRAPH_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    endif()
    # One ctest per rank count; every rank runs every test (tests/dist/dist_main.cpp).
    foreach(np 2 3)
      add_test(NAME dist_mpi_np${np}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${NPUGRAPH_MPIEXEC_FLAGS}
                       ${MPIEXEC_PREFLAGS} $<TARGET_FILE:npugraph_dist_tests> ${MPIEXEC_POSTFLAGS}
                       --gtest_brief=1)
      # RUN_SERIAL: the ranks want the machine's cores to themselves.
      set_tests_properties(dist_mpi_np${np} PROPERTIES TIMEOUT 120 RUN_SERIAL ON LABELS mpi
                           ENVIRONMENT "${_ng_dist_env}")
    endforeach()
    # The NCCL tests alone with one rank (tests/dist/test_nccl*.cpp; the 2- and 3-rank runs above
    # hold them too): without a GPU, making an NCCL communicator is refused; on one GPU (label gpu,
    # tools/gpu_check.sh) the 1-rank NCCL collectives run; more ranks need a GPU each.
    add_test(NAME dist_nccl_np1
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${NPUGRAPH_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:npugraph_dist_tests> ${MPIEXEC_POSTFLAGS}
                     --gtest_brief=1 --gtest_filter=DistNccl*)
    set_tests_properties(dist_nccl_np1 PROPERTIES TIMEOUT 120 RUN_SERIAL ON LABELS "mpi;gpu"
                         ENVIRONMENT "${_ng_dist_env}")
    # The same tests on MPI_THREAD_SERIALIZED (npugraph's MPI lock), and FUNNELED refused.
    add_test(NAME dist_mpi_np2_serialized
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${NPUGRAPH_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:npugraph_dist_tests> ${MPIEXEC_POSTFLAGS} --gtest_brief=1)
    add_test(NAME dist_mpi_thread_funneled
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${NPUGRAPH_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:npugraph_dist_tests> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(dist_mpi_np2_serialized PROPERTIES TIMEOUT 120 RUN_SERIAL ON LABELS mpi
                         ENVIRONMENT "${_ng_dist_env};NPUGRAPH_DIST_TEST_LEVEL=serialized")
    set_tests_properties(dist_mpi_thread_funneled PROPERTIES TIMEOUT 60 RUN_SERIAL ON LABELS mpi
                         ENVIRONMENT "${_ng_dist_env};NPUGRAPH_DIST_TEST_LEVEL=funneled"
                         PASS_REGULAR_EXPRESSION "thread-level check: ok"
                         FAIL_REGULAR_EXPRESSION "thread-level check: FAILED")
    # Tensor-parallel decode of the real model (tests/dist/tp/; skipped without the model file):
    # greedy tokens under --tp 2 and 3 against one process, graph against eager. About 15 s each in
    # Release on 2 cores: not in sanitizer builds, where three real-model decodes per rank would
    # take minutes (the engine's tensor-parallel path runs there on the tiny model, ranks as threads:
    # tests/llm/test_tensor_parallel_engine.cpp).
    add_executable(npugraph_tp_decode_tests ${CMAKE_CURRENT_SOURCE_DIR}/tests/dist/tp/test_tp_decode.cpp)
    target_include_directories(npugraph_tp_decode_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests
                               ${CMAKE_CURRENT_SOURCE_DIR}/apps)
    target_link_libraries(npugraph_tp_decode_tests PRIVATE npugraph_dist npugraph_warnings GTest::gtest)
    set(_ng_tp_ranks 2 3)
    if(NPUGRAPH_SANITIZE_KIND)
      set(_ng_tp_ranks)
    endif()
    foreach(np ${_ng_tp_ranks})
      add_test(NAME dist_tp_decode_np${np}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${NPUGRAPH_MPIEXEC_FLAGS}
                       ${MPIEXEC_PREFLAGS} $<TARGET_FILE:npugraph_tp_decode_tests> ${MPIEXEC_POSTFLAGS}
                       --gtest_brief=1)
      set_tests_properties(dist_tp_decode_np${np} PROPERTIES TIMEOUT 120 RUN_SERIAL ON LABELS mpi
                           ENVIRONMENT "${_ng_dist_env}" SKIP_REGULAR_EXPRESSION "tp decode: skipped")
    endforeach()
    # npugraph-generate refuses a --tp that is not the process count, naming the value and the rule.
    if(TARGET npugraph-generate)
      add_test(NAME dist_tp_generate_bad_tp
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${NPUGRAPH_MPIEXEC_FLAGS}
                       ${MPIEXEC_PREFLAGS} $<TARGET_FILE:npugraph-generate> ${MPIEXEC_POSTFLAGS}
                       --tp 3 --prompt hi)
      set_tests_properties(dist_tp_generate_bad_tp PROPERTIES TIMEOUT 60 RUN_SERIAL ON LABELS mpi
                           ENVIRONMENT "${_ng_dist_env}"
                           PASS_REGULAR_EXPRESSION "--tp 3: must equal the number of MPI processes \\(2")
    endif()
    # A rank that exits (finalizes and leaves) while rank 0 waits in an all_reduce.
    add_executable(dist_exited_rank_test ${CMAKE_CURRENT_SOURCE_DIR}/tests/dist/exited_rank/exited_rank_main.cpp)
    target_link_libraries(dist_exited_rank_test PRIVATE npugraph_dist npugraph_warnings)
    add_test(NAME dist_mpi_exited_rank
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${NPUGRAPH_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:dist_exited_rank_test> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(dist_mpi_exited_rank PROPERTIES TIMEOUT 60 RUN_SERIAL ON LABELS mpi
                         ENVIRONMENT "${_ng_dist_env}" PASS_REGULAR_EXPRESSION "exited-rank check: ok"
                         FAIL_REGULAR_EXPRESSION "exited-rank check: FAILED")
    # A rank killed by SIGKILL: --enable-recovery keeps mpirun from ending the job itself, so the
    # survivor's deadline is what reports it.
    add_test(NAME dist_mpi_killed_rank
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --enable-recovery ${NPUGRAPH_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:dist_exited_rank_test> ${MPIEXEC_POSTFLAGS} kill)
    set_tests_properties(dist_mpi_killed_rank PROPERTIES TIMEOUT 60 RUN_SERIAL ON LABELS mpi
                         ENVIRONMENT "${_ng_dist_env}" PASS_REGULAR_EXPRESSION "exited-rank check: ok"
                         FAIL_REGULAR_EXPRESSION "exited-rank check: FAILED")
  endif()

  # npugraph-generate --tp N: tensor-parallel decode over MPI (apps/tensor_parallel_mpi.hpp).
  if(TARGET npugraph-generate)
    target_link_libraries(npugraph-generate PRIVATE npugraph_dist)
    target_compile_definitions(npugraph-generate PRIVATE NPUGRAPH_HAVE_DIST)
  endif()

  # npugraph.dist (python/npugraph/dist.py over _C.dist, python/src/dist.cpp), tested under mpirun
  # with mpi4py (tests/dist/python/).
  if(TARGET npugraph_python)
    target_link_libraries(npugraph_python PRIVATE npugraph_dist)
    target_compile_definitions(npugraph_python PRIVATE NPUGRAPH_HAVE_DIST)
    # Not in sanitizer builds: the sanitizer runtime preloaded into mpirun itself is untested.
    if(NPUGRAPH_BUILD_TESTS AND DEFINED NPUGRAPH_TEST_PYTHON AND NOT NPUGRAPH_SANITIZE_KIND)
      add_test(NAME dist_python_np2
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${NPUGRAPH_MPIEXEC_FLAGS}
                       ${MPIEXEC_PREFLAGS} ${NPUGRAPH_TEST_PYTHON} -m pytest -q -p no:cacheprovider
                       ${CMAKE_CURRENT_SOURCE_DIR}/tests/dist/python ${MPIEXEC_POSTFLAGS})
      set_tests_properties(dist_python_np2 PROPERTIES TIMEOUT 120 RUN_SERIAL ON LABELS mpi
                           ENVIRONMENT "${NPUGRAPH_PY_ENV};${_ng_dist_env}")
    endif()
  endif()

  if(NPUGRAPH_BUILD_BENCH AND NOT NPUGRAPH_SANITIZE_KIND)
    # Not bench_*: make bench runs those directly, this one needs mpirun (docs/dist.md).
    add_executable(dist_allreduce_bench ${CMAKE_CURRENT_SOURCE_DIR}/bench/dist/allreduce_bench.cpp)
    target_link_libraries(dist_allreduce_bench PRIVATE npugraph_dist npugraph_warnings)
  endif()
endif()
# NPUGRAPH_NCCL's behaviour, checked by configuring the project again in scratch folders.
npugraph_add_option_test(cmake_nccl_option NcclOptionTest.cmake)
if(NOT NPUGRAPH_DIST_BUILT AND NPUGRAPH_BUILD_TESTS)
  # Without MPI the dist tests are reported as skipped, not failed.
  add_test(NAME dist_mpi COMMAND sh -c "echo 'npugraph::dist is not built (no MPI; NPUGRAPH_MPI=${NPUGRAPH_MPI}): skipped'; exit 77")
  set_tests_properties(dist_mpi PROPERTIES SKIP_RETURN_CODE 77 LABELS mpi)
endif()
