# grove_layer(NAME SOURCES... [DEPS targets...]): one layer's static library.
# Its own sources see the repository root, src/ and the generated feature
# header (PRIVATE). What it passes on is only the root its headers are named
# from (src/ for src/<layer>, the repository root for algorithms/, topology/,
# transports/) and the public header, so a program outside the layers sees a
# layer's headers only by linking it. Include paths cannot tell one layer
# from another under one root: tests/house/check_layers.py checks every
# include edge against the layers' READMEs.
function(grove_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  if(_rel MATCHES "^src/")
    set(_root ${PROJECT_SOURCE_DIR}/src)
  else()
    set(_root ${PROJECT_SOURCE_DIR})
  endif()
  target_include_directories(${name}
    PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/generated
    INTERFACE ${_root}
    PUBLIC ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC Threads::Threads ${L_DEPS})
endfunction()

# grove_gtest(NAME SOURCES... [LIBS ...] [LABELS ...] [TIMEOUT s] [PROCESSORS n]):
# a GoogleTest executable whose tests ctest discovers one by one. PROCESSORS
# tells ctest -j how many CPUs each test occupies (multi-rank tests use all).
function(grove_gtest name)
  cmake_parse_arguments(T "" "TIMEOUT;PROCESSORS" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/tests ${CMAKE_BINARY_DIR}/generated)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_PROCESSORS)
    set(T_PROCESSORS 1)
  endif()
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
                       PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}" PROCESSORS ${T_PROCESSORS})
endfunction()

# grove_check_programs(): a program outside the library (tools/, perf/,
# examples/, bindings/) links libgrove.so or the layers' static libraries,
# never both: two copies of the library's state (the config registry, the
# log, the handles) in one process would disagree. grove_dtype (no state) may
# go with either. Fails the configuration naming the target.
function(_grove_static_closure target out)
  set(seen)
  set(stack ${target})
  while(stack)
    list(POP_BACK stack t)
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(libs ${t} ${prop})
      if(NOT libs)
        continue()
      endif()
      foreach(lib ${libs})
        if(lib MATCHES "^\\$<" OR NOT TARGET ${lib})
          continue()
        endif()
        get_target_property(_aliased ${lib} ALIASED_TARGET)
        if(_aliased)
          set(lib ${_aliased})  # grove::grove is grove
        endif()
        if(lib IN_LIST seen)
          continue()
        endif()
        list(APPEND seen ${lib})
        get_target_property(_type ${lib} TYPE)
        if(_type STREQUAL "STATIC_LIBRARY" OR _type STREQUAL "INTERFACE_LIBRARY")
          list(APPEND stack ${lib})  # a shared library (libgrove.so) is a boundary
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(grove_check_programs)
  set(layers ${GROVE_LAYER_TARGETS})
  list(REMOVE_ITEM layers grove_dtype)
  set(dirs)
  foreach(dir tools perf examples bindings)
    if(EXISTS ${PROJECT_SOURCE_DIR}/${dir}/CMakeLists.txt)
      list(APPEND dirs ${PROJECT_SOURCE_DIR}/${dir})
    endif()
  endforeach()
  while(dirs)
    list(POP_BACK dirs d)
    get_property(sub DIRECTORY ${d} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${sub})
    get_property(targets DIRECTORY ${d} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(_type ${t} TYPE)
      if(_type STREQUAL "UTILITY")
        continue()
      endif()
      _grove_static_closure(${t} closure)
      if(NOT grove IN_LIST closure)
        continue()
      endif()
      foreach(layer ${layers})
        if(layer IN_LIST closure)
          message(FATAL_ERROR "${t} links libgrove.so and ${layer}: a program outside the "
                              "library uses libgrove.so's C API (and grove_launch_env, "
                              "grove_dtype) or the layers, never both")
        endif()
      endforeach()
    endforeach()
  endwhile()
endfunction()
