# CUDA kernels' host side (argument checks, dispatch table, word splits):
# needs a CUDA build, not a GPU.
if(GROVE_HAVE_CUDA)
  grove_gtest(test_cuda_kernels_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_kernels_api_test.cc
              LIBS grove_kernels grove_base LABELS unit)
endif()
