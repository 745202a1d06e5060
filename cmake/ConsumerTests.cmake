# The library as its users build against it: tests/consumer/run.cmake builds
# tests/consumer/find_package/main.cpp (-Wall -Wextra -Wpedantic -Werror) as a separate project
#   consumer_find_package[_clang]        cmake --install (component npugraph_development) into a
#                                        scratch prefix, find_package(npugraph CONFIG REQUIRED),
#                                        build, run; _clang: the same with Clang >= 15 when the build
#                                        uses GCC (the headers are warning-free with both)
#   consumer_add_subdirectory_configure  add_subdirectory(<source> npugraph) from
#                                        tests/consumer/add_subdirectory: configure and compile
#                                        main.cpp against the build-tree target (seconds)
#   consumer_add_subdirectory            the same, built (the whole library again), linked and run:
#                                        minutes on 2 cores, so label slow, registered only with
#                                        -DNPUGRAPH_SLOW_TESTS=ON (ctest -L slow)
# Sanitized builds skip them: an installed sanitized library needs sanitized users.
if(NPUGRAPH_SANITIZE_KIND)
  return()
endif()

set(_ng_consumer_args -DNPUGRAPH_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}
    -DNPUGRAPH_BINARY_DIR=${CMAKE_CURRENT_BINARY_DIR} -DCONFIG=$<CONFIG>
    -DCONSUMER_JOBS=2)

add_test(NAME consumer_find_package
         COMMAND ${CMAKE_COMMAND} ${_ng_consumer_args} -DMODE=find_package
                 -DCONSUMER_CXX=${CMAKE_CXX_COMPILER}
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer/find_package
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/consumer/run.cmake)
# cmake --install writes its manifest into the build tree: one install at a time.
set_tests_properties(consumer_find_package PROPERTIES LABELS consumer TIMEOUT 300
                     RESOURCE_LOCK npugraph_consumer_install)

if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  find_program(NPUGRAPH_CONSUMER_CLANG NAMES clang++-18 clang++-17 clang++-16 clang++-15
               DOC "Clang for the consumer_find_package_clang test (Clang >= ${NPUGRAPH_MIN_CLANG})")
  if(NPUGRAPH_CONSUMER_CLANG)
    add_test(NAME consumer_find_package_clang
             COMMAND ${CMAKE_COMMAND} ${_ng_consumer_args} -DMODE=find_package
                     -DCONSUMER_CXX=${NPUGRAPH_CONSUMER_CLANG}
                     -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer/find_package_clang
                     -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/consumer/run.cmake)
    set_tests_properties(consumer_find_package_clang PROPERTIES LABELS consumer TIMEOUT 300
                         RESOURCE_LOCK npugraph_consumer_install)
  endif()
endif()

add_test(NAME consumer_add_subdirectory_configure
         COMMAND ${CMAKE_COMMAND} ${_ng_consumer_args} -DMODE=add_subdirectory_configure
                 -DCONSUMER_CXX=${CMAKE_CXX_COMPILER}
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer/add_subdirectory_configure
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/consumer/run.cmake)
set_tests_properties(consumer_add_subdirectory_configure PROPERTIES LABELS consumer TIMEOUT 300)

if(NPUGRAPH_SLOW_TESTS)
  add_test(NAME consumer_add_subdirectory
           COMMAND ${CMAKE_COMMAND} ${_ng_consumer_args} -DMODE=add_subdirectory
                   -DCONSUMER_CXX=${CMAKE_CXX_COMPILER}
                   -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer/add_subdirectory
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/consumer/run.cmake)
  set_tests_properties(consumer_add_subdirectory PROPERTIES LABELS "consumer;slow" TIMEOUT 3600)
endif()
