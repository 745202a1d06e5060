# The CUDA backend (src/backends/cuda/, the ops' *_cuda.cu kernels; docs/backends.md, "The CUDA
# backend"). Included by the top CMakeLists.txt after the npugraph target exists.
#
#   NPUGRAPH_CUDA=AUTO  build it when nvcc and the CUDA toolkit are found (the default)
#   NPUGRAPH_CUDA=ON    build it; a missing toolkit is a configure error
#   NPUGRAPH_CUDA=OFF   build nothing CUDA: no CUDA language, no cudart, no CUDA sources
#
# Device code targets sm_90 (H100/H200) as SASS plus compute_90 PTX, which newer GPUs JIT-compile.
# Sanitizer builds leave it out under AUTO (nvcc does not take -fsanitize, and nothing there runs
# on a GPU). A build without a GPU still registers the backend: creating a cuda:N stream or tensor
# then throws a clear error (no CUDA device present).
set(NPUGRAPH_CUDA AUTO CACHE STRING "The CUDA backend: AUTO (when the toolkit is found), ON or OFF")
set_property(CACHE NPUGRAPH_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${NPUGRAPH_CUDA}" _ng_cuda)
if(NOT _ng_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "NPUGRAPH_CUDA = ${NPUGRAPH_CUDA}: must be AUTO, ON or OFF")
endif()

set(NPUGRAPH_HAVE_CUDA OFF)
if(_ng_cuda STREQUAL "AUTO" AND NPUGRAPH_SANITIZE_KIND)
  message(STATUS "CUDA backend: not built (NPUGRAPH_CUDA=AUTO in a sanitizer build)")
elseif(NOT _ng_cuda STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  # A compiler given by name or path must exist (check_language trusts a preset CMAKE_CUDA_COMPILER).
  set(_ng_nvcc "${CMAKE_CUDA_COMPILER}")
  if(_ng_nvcc AND NOT IS_ABSOLUTE "${_ng_nvcc}")
    find_program(_ng_nvcc_path NAMES "${_ng_nvcc}")
    set(_ng_nvcc "${_ng_nvcc_path}")
  endif()
  if(_ng_nvcc AND EXISTS "${_ng_nvcc}")
    find_package(CUDAToolkit QUIET)
  endif()
  if(_ng_nvcc AND EXISTS "${_ng_nvcc}" AND CUDAToolkit_FOUND)
    set(NPUGRAPH_HAVE_CUDA ON)
  elseif(_ng_cuda STREQUAL "ON")
    message(FATAL_ERROR "NPUGRAPH_CUDA=ON: no CUDA toolkit found (nvcc: '${CMAKE_CUDA_COMPILER}'); "
                        "install it, point CMAKE_CUDA_COMPILER at nvcc, or configure with NPUGRAPH_CUDA=OFF")
  else()
    message(STATUS "CUDA backend: not built (NPUGRAPH_CUDA=AUTO and no CUDA toolkit found)")
  endif()
endif()

if(NPUGRAPH_HAVE_CUDA)
  # sm_90 SASS + compute_90 PTX, unless the caller chose (-DCMAKE_CUDA_ARCHITECTURES=...).
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  set(_ng_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
  # CMake before 3.26 has no C++20 dialect flags for nvcc (12+ has -std=c++20): given here, before
  # the language is enabled, so that its feature detection records cuda_std_20 too.
  if(CMAKE_VERSION VERSION_LESS 3.26)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "CUDA backend: built (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                 "${_ng_cuda_archs})")
  # Host code of the backend: C++ files of the library like any other (src/backends/cuda/*.cpp).
  file(GLOB NPUGRAPH_CUDA_HOST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/*.cpp)
  target_sources(npugraph PRIVATE ${NPUGRAPH_CUDA_HOST_SOURCES})
  target_compile_definitions(npugraph PRIVATE NPUGRAPH_HAVE_CUDA=1)
  # Device code (the .cu files): an object library whose objects go into libnpugraph.a, with
  # nvcc's flags of its own.
  file(GLOB NPUGRAPH_CUDA_DEVICE_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/*.cu
       ${CMAKE_CURRENT_SOURCE_DIR}/src/ops/*/*_cuda.cu)
  add_library(npugraph_cuda_kernels OBJECT ${NPUGRAPH_CUDA_DEVICE_SOURCES})
  set_target_properties(npugraph_cuda_kernels PROPERTIES CUDA_ARCHITECTURES "${_ng_cuda_archs}"
                        POSITION_INDEPENDENT_CODE ON)
  target_include_directories(npugraph_cuda_kernels PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include
                             ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_compile_definitions(npugraph_cuda_kernels PRIVATE NPUGRAPH_INTERNAL_CHECKS NPUGRAPH_HAVE_CUDA=1)
  # nvcc's own warnings and the host compiler's (npugraph_warnings is C++ only).
  target_compile_options(npugraph_cuda_kernels PRIVATE -Xcompiler=-Wall,-Wextra,-Wshadow)
  if(NPUGRAPH_WERROR)
    target_compile_options(npugraph_cuda_kernels PRIVATE -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  target_sources(npugraph PRIVATE $<TARGET_OBJECTS:npugraph_cuda_kernels>)
  # CMake counts the objects as CUDA in npugraph too (device linking is off: no relocatable code).
  set_target_properties(npugraph PROPERTIES CUDA_ARCHITECTURES "${_ng_cuda_archs}")
  # Static cudart: the library, its tests and the Python module need no libcudart.so at run time,
  # and a machine without a driver still loads them (cudaGetDeviceCount then reports no device).
  target_link_libraries(npugraph PRIVATE CUDA::cudart_static)
  set(NPUGRAPH_CONFIG_EXTRA_DEPENDENCY "find_dependency(CUDAToolkit)")
else()
  set(NPUGRAPH_CONFIG_EXTRA_DEPENDENCY "")
endif()
# The option's behaviour, checked by configuring the project again in a scratch folder (ctest
# label cmake): OFF enables no CUDA language; ON with no nvcc is a configure error naming the fix.
npugraph_add_option_test(cmake_cuda_option CudaOptionTest.cmake)
if(NPUGRAPH_BUILD_TESTS AND PROJECT_IS_TOP_LEVEL)
  # The GPU tests alone (tools/gpu_check.sh: ctest -L gpu). Without a GPU they skip.
  if(NPUGRAPH_HAVE_CUDA)
    add_test(NAME gpu_tests COMMAND npugraph_tests --gtest_filter=CudaGpu*
                                    --gtest_output=xml:${CMAKE_CURRENT_BINARY_DIR}/gpu_tests.xml)
    set_tests_properties(gpu_tests PROPERTIES LABELS gpu TIMEOUT 900)
  endif()
endif()
