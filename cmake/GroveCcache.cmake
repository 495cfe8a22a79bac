# Compiling through ccache where it is installed (scripts/install-deps
# installs it): a rebuild after switching branches, a fresh clone's first
# build, the sanitizer tier's own build and the minimal build take unchanged
# objects from the cache instead of compiling them again. The cache is
# ccache's own (its default directory, or CCACHE_DIR), shared by every build
# folder of the user. ccache fails every compile when it cannot write its
# cache (a read-only home), so one file is compiled through it first and
# ccache is used only when that works. GROVE_CCACHE=OFF, or a compiler
# launcher named on the configure line, leaves it out.
option(GROVE_CCACHE "Compile through ccache when it is installed and its cache is writable" ON)
if(GROVE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER AND NOT CMAKE_C_COMPILER_LAUNCHER)
  find_program(GROVE_CCACHE_PROGRAM ccache)
  if(GROVE_CCACHE_PROGRAM)
    set(_probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/grove-ccache-probe)
    file(MAKE_DIRECTORY ${_probe_dir})
    file(WRITE ${_probe_dir}/probe.c "int grove_ccache_probe(void) { return 0; }\n")
    execute_process(COMMAND ${GROVE_CCACHE_PROGRAM} ${CMAKE_C_COMPILER} -c probe.c -o probe.o
                    WORKING_DIRECTORY ${_probe_dir} RESULT_VARIABLE _probe_rc
                    OUTPUT_QUIET ERROR_VARIABLE _probe_err)
    if(_probe_rc EQUAL 0)
      message(STATUS "Compiling through ${GROVE_CCACHE_PROGRAM} (GROVE_CCACHE=OFF: without)")
      # (CUDA, enabled later by GroveFeatures.cmake, takes its launcher from
      # here too: nvcc compiles through ccache as the host compilers do.)
      # Paths below the source folder are hashed relative to the build
      # folder and the build folder itself is not hashed (base_dir,
      # hash_dir), so clones at other paths (CI's fresh ones) share objects.
      foreach(lang C CXX CUDA)
        set(CMAKE_${lang}_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}
                                            CCACHE_NOHASHDIR=1 ${GROVE_CCACHE_PROGRAM})
      endforeach()
    else()
      string(STRIP "${_probe_err}" _probe_err)
      message(STATUS "ccache cannot compile here (${_probe_err}): building without it")
    endif()
  endif()
endif()
