# The ElasticDL CMake package: what a model zoo is compiled against.
#
#   find_package(ElasticDL CONFIG REQUIRED)
#   add_library(zoo MODULE model.cc ${ELASTICDL_ZOO_REGISTRY_SOURCE})
#   target_link_libraries(zoo PRIVATE ElasticDL::model)
#
# It lies at <prefix>/lib/cmake/ElasticDL, both in the build tree (prefix:
# the build directory, beside bin/ and lib/) and installed, so a binary finds
# it at <dir of the binary>/../lib/cmake/ElasticDL. In the build tree it
# points at the sources' headers; installed, everything is relative to the
# prefix. Included once, from src/zoo (after the libraries it names exist).
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(ELASTICDL_PACKAGE_LIBRARIES edl_model edl_tensor edl_data edl_common edl_proto)
set(_edl_package_dir lib/cmake/ElasticDL)

# configure_elasticdl_package(DIR PREFIX INCLUDE_DIRS LIBRARY_DIR REGISTRY_SOURCE PCH)
# Writes into DIR ElasticDLConfig.cmake, its version file, and
# ElasticDLFiles.txt: the files and directories the package is made of, one
# a line, relative to the prefix where they are under it. The zoo builder
# stamps cached zoos with their sizes and times, so a rebuilt or reinstalled
# ElasticDL rebuilds them. PREFIX is how the config refers to the prefix.
function(configure_elasticdl_package dir prefix include_dirs library_dir registry_source pch)
  set(ELASTICDL_PACKAGE_INCLUDE_DIRS "${include_dirs}")
  set(ELASTICDL_PACKAGE_PRECOMPILED_HEADER "${pch}")
  # The compiler's precompiled form of the header, beside it (CMake's names).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(ELASTICDL_PACKAGE_PRECOMPILED_FILE "${pch}.pch")
  else()
    set(ELASTICDL_PACKAGE_PRECOMPILED_FILE "${pch}.gch")
  endif()
  # The build types whose flags fit the header's (-O2 and -O3 both define
  # __OPTIMIZE__; NDEBUG the same): GCC ignores a precompiled header that
  # does not fit (-Winvalid-pch says so), clang refuses the unit.
  if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
    set(ELASTICDL_PACKAGE_PRECOMPILED_BUILD_TYPES "Release;RelWithDebInfo")
  else()
    set(ELASTICDL_PACKAGE_PRECOMPILED_BUILD_TYPES "${CMAKE_BUILD_TYPE}")
  endif()
  set(ELASTICDL_PACKAGE_LIBRARY_DIR "${library_dir}")
  set(ELASTICDL_PACKAGE_REGISTRY_SOURCE "${registry_source}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/ElasticDLConfig.cmake.in
                 ${dir}/ElasticDLConfig.cmake @ONLY)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/ElasticDLCompiler.cmake.in
                 ${dir}/ElasticDLCompiler.cmake @ONLY)
  write_basic_package_version_file(${dir}/ElasticDLConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  set(files ${include_dirs} ${registry_source})
  foreach(lib ${ELASTICDL_PACKAGE_LIBRARIES})
    list(APPEND files
         ${library_dir}/${CMAKE_SHARED_LIBRARY_PREFIX}${lib}${CMAKE_SHARED_LIBRARY_SUFFIX})
  endforeach()
  set(lines "")
  string(LENGTH "${prefix}/" prefix_length)
  foreach(file ${files})
    string(FIND "${file}" "${prefix}/" at)
    if(at EQUAL 0)
      string(SUBSTRING "${file}" ${prefix_length} -1 file)
    endif()
    string(APPEND lines "${file}\n")
  endforeach()
  file(CONFIGURE OUTPUT ${dir}/ElasticDLFiles.txt CONTENT "${lines}" @ONLY)
endfunction()

# Build tree: <build>/lib/cmake/ElasticDL. The headers are the sources'. A
# build with sanitizers or fuzzing instrumentation offers zoos no precompiled
# header (its flags are not the zoos').
set(_edl_zoo_pch "${CMAKE_BINARY_DIR}/src/zoo/CMakeFiles/edl_zoo_pch.dir/cmake_pch.hxx")
if(ELASTICDL_SANITIZE OR ELASTICDL_FUZZ)
  set(_edl_zoo_pch "")
endif()
configure_elasticdl_package(
  ${PROJECT_BINARY_DIR}/${_edl_package_dir}
  "${PROJECT_BINARY_DIR}"
  "${PROJECT_SOURCE_DIR}/include;${PROJECT_BINARY_DIR}/proto"
  "${CMAKE_LIBRARY_OUTPUT_DIRECTORY}"
  "${PROJECT_SOURCE_DIR}/share/zoo_registry.cc"
  "${_edl_zoo_pch}")
# The package is usable once its libraries (and the zoos' precompiled header)
# are built.
add_custom_target(elasticdl_package ALL DEPENDS ${ELASTICDL_PACKAGE_LIBRARIES} edl_zoo_pch)

# Installed: <prefix>/lib/cmake/ElasticDL.
set(_edl_install_config ${PROJECT_BINARY_DIR}/package-install)
configure_elasticdl_package(
  ${_edl_install_config}
  "\${_elasticdl_prefix}"
  "\${_elasticdl_prefix}/include"
  "\${_elasticdl_prefix}/lib"
  "\${_elasticdl_prefix}/share/elasticdl/zoo_registry.cc"
  "")
install(FILES ${_edl_install_config}/ElasticDLConfig.cmake
              ${_edl_install_config}/ElasticDLConfigVersion.cmake
              ${_edl_install_config}/ElasticDLFiles.txt
        DESTINATION ${_edl_package_dir})
install(TARGETS ${ELASTICDL_PACKAGE_LIBRARIES} LIBRARY DESTINATION lib)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/elasticdl DESTINATION include)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/elasticdl/proto DESTINATION include/elasticdl
        FILES_MATCHING PATTERN "*.pb.h")
install(FILES ${PROJECT_SOURCE_DIR}/share/zoo_registry.cc DESTINATION share/elasticdl)
