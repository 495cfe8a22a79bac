# Runs one perf binary and fails unless it exits 0, reports no wrong value and
# ran in the expected memory mode. Used by tools.cmake:
#   cmake -DPERF_BIN=<binary> -DPERF_ARGS=<args, comma-separated>
#         -DPERF_EXPECT=<text the output must contain> -P perf_run_check.cmake
string(REPLACE "," ";" _args "${PERF_ARGS}")
execute_process(COMMAND ${PERF_BIN} ${_args} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                ERROR_VARIABLE _err TIMEOUT 240)
message("${_out}${_err}")
if(NOT _rc STREQUAL "0")
  message(FATAL_ERROR "${PERF_BIN} exited with status ${_rc}")
endif()
string(FIND "${_out}" "# Out of bounds values : 0 OK" _ok)
if(_ok LESS 0)
  message(FATAL_ERROR "${PERF_BIN}: no '# Out of bounds values : 0 OK' line")
endif()
string(FIND "${_out}" "${PERF_EXPECT}" _mode)
if(_mode LESS 0)
  message(FATAL_ERROR "${PERF_BIN}: the output does not contain '${PERF_EXPECT}'")
endif()
string(REGEX MATCHALL "\n +[0-9]+ +[0-9]+ +[a-z0-9]+ " _rows "${_out}")
list(LENGTH _rows _nrows)
if(_nrows LESS 3)
  message(FATAL_ERROR "${PERF_BIN}: expected at least 3 result rows, found ${_nrows}")
endif()
