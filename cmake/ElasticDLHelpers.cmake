# elasticdl_library(NAME [SHARED] [UNITY N] SOURCES ... DEPS ...)
# A library of our own code: public headers under include/, internal headers
# under src/, warnings on. SHARED for the layers a model-zoo library links
# (loaded at run time, it must share them with the process); static otherwise.
# UNITY N: its files are compiled N to a unit. Most of a unit's time goes to
# the headers it includes (LibTorch's, gRPC's, protobuf's): their templates
# are instantiated and their inline functions optimized once per unit (with
# LibTorch's precompiled header, a unit still spends 3 s on them with clang
# before its first line of its own, 7 s with GCC). File-local names must then differ between a library's
# files; a file with source-level flags is compiled alone (CMake's rule).
function(elasticdl_library name)
  cmake_parse_arguments(ARG "SHARED" "UNITY" "SOURCES;DEPS" ${ARGN})
  if(ARG_SHARED)
    add_library(${name} SHARED ${ARG_SOURCES})
    # No <name>_EXPORTS macro: executables may then reuse the library's
    # precompiled header.
    set_target_properties(${name} PROPERTIES DEFINE_SYMBOL "")
  else()
    add_library(${name} STATIC ${ARG_SOURCES})
  endif()
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
    $<INSTALL_INTERFACE:include>)
  target_compile_options(${name} PRIVATE ${ELASTICDL_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  if(ARG_UNITY)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ARG_UNITY})
  endif()
endfunction()

# elasticdl_test(NAME [UNITY] SOURCES ... DEPS ... [LABELS ...])
# A GoogleTest binary registered with CTest, one CTest entry per binary.
# UNITY: its files are compiled four to a unit, so that LibTorch's and
# GoogleTest's templates are instantiated and optimized once per unit instead
# of once per file (file-local names must then differ between the files; a
# file that registers zoo entries, which are named after their file, sets
# SKIP_UNITY_BUILD_INCLUSION).
function(elasticdl_test name)
  cmake_parse_arguments(ARG "UNITY" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  # -fPIC like the shared libraries, so their precompiled headers can be reused.
  # A test's own code runs once and is not optimized (-O0: about 2.5 times
  # faster to compile than -O1; the code it tests is the libraries', built
  # with the build type's flags). A test that reuses a library's precompiled
  # header (LibTorch's) must define __OPTIMIZE__ as that header did: -O1,
  # most of whose time is LibTorch's and GoogleTest's templates, which -O1
  # optimizes in three quarters of -O2's.
  set(pch "$<OR:$<BOOL:$<TARGET_PROPERTY:PRECOMPILE_HEADERS_REUSE_FROM>>,$<BOOL:$<TARGET_PROPERTY:PRECOMPILE_HEADERS>>>")
  target_compile_options(${name} PRIVATE ${ELASTICDL_WARNINGS} -fPIC $<IF:${pch},-O1,-O0>)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  if(ARG_UNITY)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 4)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${ARG_LABELS}"
    ENVIRONMENT "ELASTICDL_TEST_SRCDIR=${PROJECT_SOURCE_DIR}")
endfunction()

# Files installed under share/elasticdl/<subdir>, and copied to the same place
# in the build tree (what InstalledShareDir finds beside the binary), by
# target `target`.
function(elasticdl_share_files target subdir)
  set(out ${CMAKE_BINARY_DIR}/share/elasticdl/${subdir})
  add_custom_command(
    OUTPUT ${out}/.stamp
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${ARGN} ${out}
    COMMAND ${CMAKE_COMMAND} -E touch ${out}/.stamp
    DEPENDS ${ARGN}
    COMMENT "share/elasticdl/${subdir}")
  add_custom_target(${target} ALL DEPENDS ${out}/.stamp)
  install(FILES ${ARGN} DESTINATION share/elasticdl/${subdir})
endfunction()

# The tree under `dir` installed as it is under share/elasticdl/<subdir>, and
# copied whole to the same place in the build tree (a file removed from `dir`
# goes from the copy too), by target `target`.
function(elasticdl_share_tree target subdir dir)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${dir}/*)
  set(out ${CMAKE_BINARY_DIR}/share/elasticdl/${subdir})
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${out}
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${dir} ${out}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${files}
    COMMENT "share/elasticdl/${subdir}")
  add_custom_target(${target} ALL DEPENDS ${stamp})
  install(DIRECTORY ${dir}/ DESTINATION share/elasticdl/${subdir})
endfunction()
