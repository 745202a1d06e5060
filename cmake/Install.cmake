# cmake --install: what an installed npugraph is (docs/install.md).
#   <prefix>/lib/libnpugraph.a
#   <prefix>/include/npugraph/**.hpp                     the public headers
#   <prefix>/lib/cmake/npugraph/npugraphConfig.cmake     find_package(npugraph CONFIG)
#                              npugraphConfigVersion.cmake
#                              npugraphTargets[-<config>].cmake   the imported npugraph::npugraph
#   <prefix>/bin/npugraph-generate                       with NPUGRAPH_BUILD_APPS
# The Python module is not installed here (it is built into <build>/python/npugraph).
include(CMakePackageConfigHelpers)

set(NPUGRAPH_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/npugraph CACHE STRING
    "Where under the prefix the CMake package npugraph goes")

install(TARGETS npugraph EXPORT npugraphTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT npugraph_development)
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/npugraph
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT npugraph_development
        FILES_MATCHING PATTERN "*.hpp"
        PATTERN "dist.hpp" EXCLUDE)  # npugraph::dist (MPI) is a build-tree library for now (docs/dist.md)
install(EXPORT npugraphTargets NAMESPACE npugraph:: FILE npugraphTargets.cmake
        DESTINATION ${NPUGRAPH_INSTALL_CMAKEDIR} COMPONENT npugraph_development)

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/npugraphConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/npugraphConfig.cmake
                              INSTALL_DESTINATION ${NPUGRAPH_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same major.minor satisfies a request.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/npugraphConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/npugraphConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/npugraphConfigVersion.cmake
        DESTINATION ${NPUGRAPH_INSTALL_CMAKEDIR} COMPONENT npugraph_development)

if(NPUGRAPH_BUILD_APPS)
  install(TARGETS npugraph-generate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          COMPONENT npugraph_runtime)
endif()
