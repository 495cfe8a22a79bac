# Finds the torch that the grove.torch backend is built for, without
# find_package(Torch): pip's CUDA builds of torch ship CMake files that stop
# configure when no CUDA toolkit is installed, although a CPU extension needs
# none of it. Instead the chosen Python is asked (cmake/torch_query.py) for
# torch's headers, libraries and C++ ABI, and an imported target is made.
#
# The interpreter (GROVE_TORCH_PYTHON, a cache variable) is the first of
#   <source>/.venv/bin/python   the virtual environment scripts/install-deps makes
#   python3 on the PATH, /usr/bin/python3
# that can import torch; set it to pick another.
#
# Sets GROVE_TORCH_FOUND, GROVE_TORCH_VERSION, GROVE_TORCH_WHY (when not found)
# and the target grove_torch_deps (headers, libc10/libtorch_cpu/libtorch, ABI).
set(GROVE_TORCH_PYTHON "" CACHE FILEPATH "Python interpreter whose torch the grove backend is built for")

function(grove_find_torch)
  set(GROVE_TORCH_FOUND 0 PARENT_SCOPE)
  set(_python "${GROVE_TORCH_PYTHON}")
  if(NOT _python)
    find_program(_grove_path_python3 NAMES python3)
    foreach(_cand "${PROJECT_SOURCE_DIR}/.venv/bin/python" ${_grove_path_python3} /usr/bin/python3)
      if(_cand AND EXISTS "${_cand}")
        execute_process(COMMAND "${_cand}" -c "import torch"
                        RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
        if(_rc EQUAL 0)
          set(_python "${_cand}")
          break()
        endif()
      endif()
    endforeach()
  endif()
  if(NOT _python)
    set(GROVE_TORCH_WHY "no Python that imports torch (scripts/install-deps makes .venv with it)"
        PARENT_SCOPE)
    return()
  endif()
  set(GROVE_TORCH_PYTHON "${_python}" CACHE FILEPATH
      "Python interpreter whose torch the grove backend is built for" FORCE)

  execute_process(COMMAND "${_python}" "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/torch_query.py"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    set(GROVE_TORCH_WHY "${_python} imports torch but cannot describe it: ${_err}" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  foreach(_line ${_lines})
    if(_line MATCHES "^([a-z0-9_]+)=(.*)$")
      set(_torch_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    endif()
  endforeach()
  # The query reports ';'-joined folders; the foreach above split them.
  string(REGEX MATCHALL "include=[^\n]*" _inc "${_out}")
  string(REPLACE "include=" "" _inc "${_inc}")

  add_library(grove_torch_deps INTERFACE IMPORTED GLOBAL)
  if(_inc)
    set(_libs)
    foreach(_name c10 torch_cpu torch)
      find_library(_grove_lib_${_name} NAMES ${_name} PATHS "${_torch_libdir}" NO_DEFAULT_PATH)
      if(NOT _grove_lib_${_name})
        set(GROVE_TORCH_WHY "lib${_name}.so is missing from ${_torch_libdir}" PARENT_SCOPE)
        return()
      endif()
      list(APPEND _libs "${_grove_lib_${_name}}")
    endforeach()
    set_target_properties(grove_torch_deps PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_inc}"
      INTERFACE_LINK_LIBRARIES "${_libs}"
      INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${_torch_cxx11_abi}")
  else()
    # A torch without headers in its package (Debian's python3-torch keeps
    # them in libtorch-dev): its CMake files must do.
    find_package(Torch QUIET)
    if(NOT Torch_FOUND)
      set(GROVE_TORCH_WHY "torch ${_torch_version} of ${_python} has no headers and no Torch CMake files"
          PARENT_SCOPE)
      return()
    endif()
    set_target_properties(grove_torch_deps PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
      INTERFACE_LINK_LIBRARIES "${TORCH_LIBRARIES}"
      INTERFACE_COMPILE_OPTIONS "${TORCH_CXX_FLAGS}")
  endif()
  set(GROVE_TORCH_FOUND 1 PARENT_SCOPE)
  set(GROVE_TORCH_VERSION "${_torch_version}" PARENT_SCOPE)
  set(GROVE_TORCH_CUDA "${_torch_cuda}" PARENT_SCOPE)
endfunction()
