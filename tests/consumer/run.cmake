# The consumer tests' driver (cmake/ConsumerTests.cmake registers them): builds
# tests/consumer/find_package/main.cpp as a separate project, the way a user would, and runs it.
#   cmake -DMODE=<mode> -DNPUGRAPH_SOURCE_DIR=<src> -DNPUGRAPH_BINARY_DIR=<build> -DWORK_DIR=<scratch>
#         [-DCONFIG=Release] [-DCONSUMER_CXX=g++-12] [-DCONSUMER_JOBS=2] -P tests/consumer/run.cmake
# MODE:
#   find_package                cmake --install <build> (component npugraph_development) into
#                               <scratch>/prefix; configure tests/consumer/find_package against it
#                               (find_package(npugraph CONFIG REQUIRED)), build, run
#   add_subdirectory_configure  configure tests/consumer/add_subdirectory (add_subdirectory(<src>
#                               npugraph)) and compile main.cpp only: the build-tree usage
#                               requirements, without building the library a second time
#   add_subdirectory            the same, built (the library included), linked and run
# <scratch> is emptied first. Each step prints its seconds.
cmake_minimum_required(VERSION 3.25)

foreach(var MODE NPUGRAPH_SOURCE_DIR NPUGRAPH_BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONSUMER_JOBS)
  set(CONSUMER_JOBS 2)
endif()
if(NOT CONFIG)
  set(CONFIG Release)
endif()
set(consumer_source ${NPUGRAPH_SOURCE_DIR}/tests/consumer)
set(compiler_args)
if(CONSUMER_CXX)
  set(compiler_args -DCMAKE_CXX_COMPILER=${CONSUMER_CXX})
endif()

# Runs one step, fails the test with its output when it fails; OUTPUT_VAR gets stdout.
function(step name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT_VAR" "COMMAND")
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${arg_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP t1 "%s")
  math(EXPR seconds "${t1} - ${t0}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer ${MODE}: ${name} failed (${rc}) after ${seconds} s\n"
                        "command: ${arg_COMMAND}\n${out}\n${err}")
  endif()
  message(STATUS "consumer ${MODE}: ${name}: ${seconds} s")
  if(arg_OUTPUT_VAR)
    set(${arg_OUTPUT_VAR} "${out}" PARENT_SCOPE)
  endif()
endfunction()

# Runs the consumer and checks that it says every check passed.
function(run_consumer exe)
  step("run" COMMAND ${exe} OUTPUT_VAR out)
  message(STATUS "${out}")
  if(NOT out MATCHES "npugraph consumer: all checks passed")
    message(FATAL_ERROR "consumer ${MODE}: the consumer did not pass its checks:\n${out}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

if(MODE STREQUAL "find_package")
  set(prefix ${WORK_DIR}/prefix)
  step("cmake --install" COMMAND ${CMAKE_COMMAND} --install ${NPUGRAPH_BINARY_DIR} --prefix ${prefix}
                                 --config ${CONFIG} --component npugraph_development)
  file(GLOB_RECURSE installed_config ${prefix}/*/npugraphConfig.cmake)
  file(GLOB_RECURSE installed_lib ${prefix}/*/libnpugraph.a)
  if(NOT installed_config OR NOT installed_lib OR NOT EXISTS ${prefix}/include/npugraph/npugraph.hpp)
    message(FATAL_ERROR "consumer ${MODE}: the install lacks npugraphConfig.cmake, libnpugraph.a or "
                        "include/npugraph/npugraph.hpp under ${prefix}")
  endif()
  # Only this prefix: no package registry, no other install of npugraph.
  step("configure" COMMAND ${CMAKE_COMMAND} -S ${consumer_source}/find_package -B ${WORK_DIR}/build
                           ${compiler_args} -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_PREFIX_PATH=${prefix}
                           -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
                           -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
  file(STRINGS ${WORK_DIR}/build/CMakeCache.txt found_dir REGEX "^npugraph_DIR:")
  string(FIND "${found_dir}" "${prefix}/" at)
  if(NOT at GREATER -1)
    message(FATAL_ERROR "consumer ${MODE}: find_package found another npugraph: ${found_dir}")
  endif()
  step("build" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build --config ${CONFIG}
                       --parallel ${CONSUMER_JOBS})
  run_consumer(${WORK_DIR}/build/npugraph_consumer)

elseif(MODE STREQUAL "add_subdirectory_configure" OR MODE STREQUAL "add_subdirectory")
  # Unix Makefiles whatever the outer build uses: its per-source object targets let the configure
  # mode compile main.cpp alone.
  step("configure" COMMAND ${CMAKE_COMMAND} -S ${consumer_source}/add_subdirectory -B ${WORK_DIR}/build
                           -G "Unix Makefiles" ${compiler_args} -DCMAKE_BUILD_TYPE=${CONFIG}
                           -DNPUGRAPH_SOURCE_DIR=${NPUGRAPH_SOURCE_DIR})
  if(MODE STREQUAL "add_subdirectory_configure")
    # The object target of main.cpp (named after its path: it lies outside the project's folder).
    step("make help" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build --target help OUTPUT_VAR help)
    if(NOT help MATCHES "\\.\\.\\. ([^\n]*find_package/main\\.o)\n")
      message(FATAL_ERROR "consumer ${MODE}: no object target for main.cpp in:\n${help}")
    endif()
    step("compile main.cpp" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build --target ${CMAKE_MATCH_1})
  else()
    step("build" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel ${CONSUMER_JOBS})
    run_consumer(${WORK_DIR}/build/npugraph_consumer)
  endif()
else()
  message(FATAL_ERROR "run.cmake: MODE = ${MODE}: expected find_package, "
                      "add_subdirectory_configure or add_subdirectory")
endif()
