# One-sided access's core (core/rma.h) over a transport's one-sided writes.
if(TARGET grove_core)
  grove_gtest(test_rma SOURCES ${CMAKE_CURRENT_LIST_DIR}/rma_test.cc
              LIBS grove_core grove_base LABELS unit)
endif()
