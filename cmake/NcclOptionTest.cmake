# ctest cmake_nccl_option (cmake/Nccl.cmake): configures the project in scratch folders (CUDA off,
# so that no toolkit detection slows it) and checks that NPUGRAPH_NCCL=ON without the CUDA backend
# fails with the message that says what to do, that a bad value names the choices, and that OFF
# configures. Configure only: nothing is compiled.
set(common -DNPUGRAPH_BUILD_TESTS=OFF -DNPUGRAPH_BUILD_BENCH=OFF -DNPUGRAPH_BUILD_EXAMPLES=OFF
           -DNPUGRAPH_BUILD_PYTHON=OFF -DNPUGRAPH_BUILD_APPS=OFF -DNPUGRAPH_INSTALL=OFF -DNPUGRAPH_CUDA=OFF)
file(REMOVE_RECURSE ${WORK})

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/on ${common} -DNPUGRAPH_NCCL=ON
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "NPUGRAPH_NCCL=ON with NPUGRAPH_CUDA=OFF: configure succeeded")
endif()
if(NOT "${out}${err}" MATCHES "NPUGRAPH_NCCL=ON: the CUDA backend is not built \\(NPUGRAPH_CUDA=OFF\\)")
  message(FATAL_ERROR "NPUGRAPH_NCCL=ON with NPUGRAPH_CUDA=OFF: not the expected message:\n${out}\n${err}")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/on ${common} -DNPUGRAPH_NCCL=maybe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "NPUGRAPH_NCCL = maybe: must be AUTO, ON or OFF")
  message(FATAL_ERROR "NPUGRAPH_NCCL=maybe: expected a configure error naming the choices:\n${out}\n${err}")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/on ${common} -DNPUGRAPH_NCCL=OFF
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT "${out}" MATCHES "npugraph::dist on NCCL: not built \\(NPUGRAPH_NCCL=OFF\\)")
  message(FATAL_ERROR "NPUGRAPH_NCCL=OFF: configure failed or did not say so:\n${out}\n${err}")
endif()
file(REMOVE_RECURSE ${WORK})
message(STATUS "NPUGRAPH_NCCL: ON without the CUDA backend and a bad value fail clearly; OFF configures")
