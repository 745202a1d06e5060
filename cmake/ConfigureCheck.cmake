# Shared by the option tests (cmake/*OptionTest.cmake, cmake/SanitizeIsaTest.cmake), which run in
# script mode (cmake -P) with SOURCE and WORK set.
#
# configure_expect(<dir> <ok|fail> <regex> <what> <args>...): configures SOURCE into WORK/<dir> with
# <args>, and stops the test, naming <what>, unless the configure succeeded (ok) or failed (fail)
# and its output matches <regex>.
function(configure_expect dir outcome regex what)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/${dir} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(outcome STREQUAL "ok")
    set(as_expected 0)
    if(rc EQUAL 0)
      set(as_expected 1)
    endif()
  else()
    set(as_expected 1)
    if(rc EQUAL 0)
      set(as_expected 0)
    endif()
  endif()
  if(NOT as_expected OR NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected the configure to end ${outcome} and print '${regex}' "
                        "(exit code ${rc}):\n${out}\n${err}")
  endif()
endfunction()
