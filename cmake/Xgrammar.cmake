# xgrammar's C++ core (the grammar engine behind npugraph-serve's structured output: Note
# [Structured output] in apps/serve/grammar.hpp), compiled from its PyPI sdist, which
# tools/fetch_source.py unpacks (make setup runs it) into ${XDG_CACHE_HOME:-~/.cache}/npugraph/src.
# Nothing of xgrammar is kept in this repository. Defines the static library npugraph_xgrammar when
# the source is there; without it npugraph-serve is built without structured output (it answers
# response_format json_object / json_schema with a 400 saying so) and this prints how to get it.
#
# Only the library: xgrammar's own CMakeLists.txt also builds its Python bindings (TVM-FFI) and
# turns every warning into an error with -flto, neither of which this build wants. Its sources are
# built as its CMakeLists.txt builds them (C++17, cpp/*.cc without cpp/tvm_ffi, picojson and dlpack
# on the include path), without warnings (third-party code: not ours to fix).
set(NPUGRAPH_XGRAMMAR_VERSION 0.2.9)
if(DEFINED ENV{NPUGRAPH_SOURCE_DIR})
  set(_ng_src_root "$ENV{NPUGRAPH_SOURCE_DIR}")
elseif(DEFINED ENV{XDG_CACHE_HOME})
  set(_ng_src_root "$ENV{XDG_CACHE_HOME}/npugraph/src")
else()
  set(_ng_src_root "$ENV{HOME}/.cache/npugraph/src")
endif()
set(NPUGRAPH_XGRAMMAR_DIR "${_ng_src_root}/xgrammar-${NPUGRAPH_XGRAMMAR_VERSION}" CACHE PATH
    "xgrammar ${NPUGRAPH_XGRAMMAR_VERSION}'s unpacked sdist (tools/fetch_source.py xgrammar)")

if(EXISTS "${NPUGRAPH_XGRAMMAR_DIR}/include/xgrammar/xgrammar.h")
  file(GLOB_RECURSE _ng_xgrammar_sources CONFIGURE_DEPENDS "${NPUGRAPH_XGRAMMAR_DIR}/cpp/*.cc")
  list(FILTER _ng_xgrammar_sources EXCLUDE REGEX "/cpp/tvm_ffi/.*\\.cc$")
  add_library(npugraph_xgrammar STATIC ${_ng_xgrammar_sources})
  set_target_properties(npugraph_xgrammar PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                                                     POSITION_INDEPENDENT_CODE ON)
  target_include_directories(npugraph_xgrammar SYSTEM PUBLIC "${NPUGRAPH_XGRAMMAR_DIR}/include"
                             "${NPUGRAPH_XGRAMMAR_DIR}/3rdparty/picojson"
                             "${NPUGRAPH_XGRAMMAR_DIR}/3rdparty/dlpack/include")
  target_compile_definitions(npugraph_xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0
                                                      XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
  target_compile_options(npugraph_xgrammar PRIVATE -w)
  find_package(Threads REQUIRED)
  target_link_libraries(npugraph_xgrammar PUBLIC Threads::Threads)
  set(NPUGRAPH_HAVE_XGRAMMAR ON)
  message(STATUS "xgrammar ${NPUGRAPH_XGRAMMAR_VERSION}: ${NPUGRAPH_XGRAMMAR_DIR}")
else()
  set(NPUGRAPH_HAVE_XGRAMMAR OFF)
  message(WARNING "npugraph-serve is built without structured output: xgrammar ${NPUGRAPH_XGRAMMAR_VERSION}'s "
                  "source is not in ${NPUGRAPH_XGRAMMAR_DIR} (run: python3 tools/fetch_source.py xgrammar, "
                  "or make setup)")
endif()
