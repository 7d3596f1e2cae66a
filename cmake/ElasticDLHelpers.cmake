# elasticdl_library(NAME SOURCES ... DEPS ...)
# A static library of our own code: public headers under include/, internal
# headers under src/, warnings on.
function(elasticdl_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>)
  target_compile_options(${name} PRIVATE ${ELASTICDL_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# elasticdl_test(NAME SOURCES ... DEPS ... [LABELS ...])
# A GoogleTest binary registered with CTest, one CTest entry per binary.
function(elasticdl_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${ELASTICDL_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${ARG_LABELS}"
    ENVIRONMENT "ELASTICDL_TEST_SRCDIR=${PROJECT_SOURCE_DIR}")
endfunction()
