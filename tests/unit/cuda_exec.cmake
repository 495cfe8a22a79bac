# The CUDA executor's host API (launch packing, argument checks, clean CUDA
# errors): needs a CUDA build, not a GPU.
if(GROVE_HAVE_CUDA)
  grove_gtest(test_cuda_exec_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_exec_api_test.cc
              LIBS grove_exec grove_kernels grove_base LABELS unit)
endif()
