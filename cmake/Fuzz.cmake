# libFuzzer harnesses: tests/fuzz/<name>_fuzzer.cpp -> <build>/<name>_fuzzer, built when
# NPUGRAPH_SANITIZE=fuzzer (clang; the library is then compiled with -fsanitize=fuzzer-no-link,
# address,undefined by cmake/Sanitizers.cmake). `make fuzz` / `make test-fuzz` run them on
# tests/fuzz/corpus/<name>/ (see tests/fuzz/README.md).
if(NPUGRAPH_SANITIZE_KIND STREQUAL "fuzzer")
  file(GLOB NPUGRAPH_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz/*_fuzzer.cpp)
  foreach(src ${NPUGRAPH_FUZZ_SOURCES})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz
                               ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_link_libraries(${name} PRIVATE npugraph npugraph_warnings)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  endforeach()
endif()
