# cmake --install <build> [--prefix P] lays out what a C/C++ user links:
#   include/grove/grove.h          the public header
#   <libdir>/libgrove.so.0.1.0     with its soname link libgrove.so.0 and libgrove.so
#   bin/                           grove-launch, grove-info, grove-topo, grove-plan,
#                                  the *_perf binaries and sgd_trainer
#   <libdir>/pkgconfig/grove.pc    pkg-config --cflags --libs grove
#   <libdir>/cmake/grove/          find_package(grove) -> grove::grove
# Everything is relocatable: the .pc file and the CMake package find the
# prefix from where they lie, and programs find the library through $ORIGIN.
include(CMakePackageConfigHelpers)

install(FILES ${PROJECT_SOURCE_DIR}/include/grove/grove.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/grove)
install(TARGETS grove EXPORT groveTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(_grove_programs grove-launch grove-info grove-topo grove-plan sgd_trainer)
foreach(coll ${GROVE_PERF_BINARIES})
  list(APPEND _grove_programs ${coll}_perf)
endforeach()
foreach(prog ${_grove_programs})
  if(TARGET ${prog})
    install(TARGETS ${prog} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# CMake package: grove::grove (the shared library, its header folder, Threads).
set(_grove_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/grove)
install(EXPORT groveTargets NAMESPACE grove:: DESTINATION ${_grove_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/groveConfig.cmake.in
  ${CMAKE_BINARY_DIR}/generated/groveConfig.cmake INSTALL_DESTINATION ${_grove_cmake_dir})
# 0.x: a minor release may change the API, so only the same minor matches.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/groveConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/groveConfig.cmake
              ${CMAKE_BINARY_DIR}/generated/groveConfigVersion.cmake
        DESTINATION ${_grove_cmake_dir})

# pkg-config: the prefix is found from the .pc file's own folder
# (<prefix>/<libdir>/pkgconfig), so an installed tree can move.
set(_up "..")
string(REPLACE "/" ";" _parts "${CMAKE_INSTALL_LIBDIR}")
foreach(_part ${_parts})
  string(APPEND _up "/..")
endforeach()
set(GROVE_PC_PREFIX "\${pcfiledir}/${_up}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/grove.pc.in ${CMAKE_BINARY_DIR}/generated/grove.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/generated/grove.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
