# ctest cmake_nccl_option (cmake/Nccl.cmake): configures the project in scratch folders (CUDA off,
# so that no toolkit detection slows it) and checks that NPUGRAPH_NCCL=ON without the CUDA backend
# fails with the message that says what to do, that a bad value names the choices, and that OFF
# configures. Configure only: nothing is compiled.
set(common -DNPUGRAPH_BUILD_TESTS=OFF -DNPUGRAPH_BUILD_BENCH=OFF -DNPUGRAPH_BUILD_EXAMPLES=OFF
           -DNPUGRAPH_BUILD_PYTHON=OFF -DNPUGRAPH_BUILD_APPS=OFF -DNPUGRAPH_INSTALL=OFF -DNPUGRAPH_CUDA=OFF)
include(${CMAKE_CURRENT_LIST_DIR}/ConfigureCheck.cmake)
file(REMOVE_RECURSE ${WORK})

configure_expect(on fail "NPUGRAPH_NCCL=ON: the CUDA backend is not built \\(NPUGRAPH_CUDA=OFF\\)"
                 "NPUGRAPH_NCCL=ON with NPUGRAPH_CUDA=OFF" ${common} -DNPUGRAPH_NCCL=ON)
configure_expect(on fail "NPUGRAPH_NCCL = maybe: must be AUTO, ON or OFF" "NPUGRAPH_NCCL=maybe"
                 ${common} -DNPUGRAPH_NCCL=maybe)
configure_expect(on ok "npugraph::dist on NCCL: not built \\(NPUGRAPH_NCCL=OFF\\)" "NPUGRAPH_NCCL=OFF"
                 ${common} -DNPUGRAPH_NCCL=OFF)
file(REMOVE_RECURSE ${WORK})
message(STATUS "NPUGRAPH_NCCL: ON without the CUDA backend and a bad value fail clearly; OFF configures")
