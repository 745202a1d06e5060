# ctest cmake_cuda_option (cmake/Cuda.cmake): configures the project in scratch folders and checks
# that NPUGRAPH_CUDA=OFF enables no CUDA at all and that NPUGRAPH_CUDA=ON without nvcc fails with
# the message that says what to do. Configure only: nothing is compiled.
set(common -DNPUGRAPH_BUILD_TESTS=OFF -DNPUGRAPH_BUILD_BENCH=OFF -DNPUGRAPH_BUILD_EXAMPLES=OFF
           -DNPUGRAPH_BUILD_PYTHON=OFF -DNPUGRAPH_BUILD_APPS=OFF -DNPUGRAPH_INSTALL=OFF)
file(REMOVE_RECURSE ${WORK})

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/off ${common} -DNPUGRAPH_CUDA=OFF
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "NPUGRAPH_CUDA=OFF: configure failed:\n${out}\n${err}")
endif()
file(STRINGS ${WORK}/off/CMakeCache.txt cuda_lines REGEX "^CMAKE_CUDA_COMPILER:")
if(cuda_lines OR EXISTS ${WORK}/off/CMakeFiles/${CMAKE_VERSION}/CMakeCUDACompiler.cmake)
  message(FATAL_ERROR "NPUGRAPH_CUDA=OFF: the CUDA language was enabled anyway (${cuda_lines})")
endif()
file(GLOB_RECURSE flag_files ${WORK}/off/CMakeFiles/npugraph.dir/flags.make)
foreach(f ${flag_files})
  file(READ ${f} flags)
  if(flags MATCHES "NPUGRAPH_HAVE_CUDA|CUDA_FLAGS")
    message(FATAL_ERROR "NPUGRAPH_CUDA=OFF: ${f} still compiles CUDA:\n${flags}")
  endif()
endforeach()
file(READ ${WORK}/off/CMakeFiles/npugraph.dir/build.make build_make)
if(build_make MATCHES "backends/cuda/|_cuda\\.cu")
  message(FATAL_ERROR "NPUGRAPH_CUDA=OFF: CUDA sources are still in the npugraph target")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/on ${common} -DNPUGRAPH_CUDA=ON
                        -DCMAKE_CUDA_COMPILER=/nonexistent/nvcc
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "NPUGRAPH_CUDA=ON with no nvcc: configure succeeded")
endif()
if(NOT "${out}${err}" MATCHES "NPUGRAPH_CUDA=ON: no CUDA toolkit found")
  message(FATAL_ERROR "NPUGRAPH_CUDA=ON with no nvcc: not the expected message:\n${out}\n${err}")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/bad ${common} -DNPUGRAPH_CUDA=maybe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "must be AUTO, ON or OFF")
  message(FATAL_ERROR "NPUGRAPH_CUDA=maybe: expected a configure error naming the choices:\n${out}\n${err}")
endif()
file(REMOVE_RECURSE ${WORK})
message(STATUS "NPUGRAPH_CUDA: OFF builds nothing CUDA; ON without nvcc and a bad value fail clearly")
