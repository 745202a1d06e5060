# NCCL for npugraph::dist on the CUDA backend (src/dist/nccl_*.cpp; docs/dist.md, "On NCCL").
# Included by cmake/Dist.cmake once it knows whether npugraph::dist is built.
#
#   NPUGRAPH_NCCL=AUTO  use NCCL when the CUDA backend and npugraph::dist are both built and nccl.h
#                       and libnccl are found (NCCL_ROOT, then the CUDA toolkit's folders)
#   NPUGRAPH_NCCL=ON    the same; anything missing is a configure error that says what to do
#   NPUGRAPH_NCCL=OFF   never: Communicator::nccl then throws UnsupportedError
set(NPUGRAPH_NCCL AUTO CACHE STRING "NCCL collectives in npugraph::dist: AUTO, ON or OFF")
set_property(CACHE NPUGRAPH_NCCL PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${NPUGRAPH_NCCL}" _ng_nccl)
if(NOT _ng_nccl MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "NPUGRAPH_NCCL = ${NPUGRAPH_NCCL}: must be AUTO, ON or OFF")
endif()

set(NPUGRAPH_HAVE_NCCL OFF)
set(_ng_nccl_why "NPUGRAPH_NCCL=OFF")
if(NOT _ng_nccl STREQUAL "OFF")
  if(NOT NPUGRAPH_HAVE_CUDA)
    set(_ng_nccl_why "the CUDA backend is not built (NPUGRAPH_CUDA=${NPUGRAPH_CUDA})")
  elseif(NOT NPUGRAPH_DIST_BUILT)
    set(_ng_nccl_why "npugraph::dist is not built (NPUGRAPH_MPI=${NPUGRAPH_MPI}; it needs MPI)")
  else()
    set(_ng_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
    find_path(NPUGRAPH_NCCL_INCLUDE_DIR nccl.h HINTS ${_ng_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
              PATH_SUFFIXES include)
    find_library(NPUGRAPH_NCCL_LIBRARY nccl HINTS ${_ng_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64)
    if(NPUGRAPH_NCCL_INCLUDE_DIR AND NPUGRAPH_NCCL_LIBRARY)
      set(NPUGRAPH_HAVE_NCCL ON)
    else()
      set(_ng_nccl_why "NCCL not found (nccl.h: '${NPUGRAPH_NCCL_INCLUDE_DIR}', libnccl: '${NPUGRAPH_NCCL_LIBRARY}')")
    endif()
  endif()
  if(_ng_nccl STREQUAL "ON" AND NOT NPUGRAPH_HAVE_NCCL)
    message(FATAL_ERROR "NPUGRAPH_NCCL=ON: ${_ng_nccl_why}; build the CUDA backend and npugraph::dist "
                        "(CUDA toolkit and MPI), install NCCL or point NCCL_ROOT at it, or configure "
                        "with NPUGRAPH_NCCL=OFF")
  endif()
endif()
if(NPUGRAPH_HAVE_NCCL)
  message(STATUS "npugraph::dist on NCCL: built (${NPUGRAPH_NCCL_LIBRARY})")
else()
  message(STATUS "npugraph::dist on NCCL: not built (${_ng_nccl_why})")
endif()
