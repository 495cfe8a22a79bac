# Reliability pieces of the core that need no processes: the settings every
# rank must agree on (core/agreement.h).
grove_gtest(test_agreement SOURCES ${CMAKE_CURRENT_LIST_DIR}/agreement_test.cc
            LIBS grove_core LABELS unit)
# What a communicator made from another (split, shrink, grow) inherits.
grove_gtest(test_options SOURCES ${CMAKE_CURRENT_LIST_DIR}/options_test.cc
            LIBS grove_core LABELS unit)
# The order of a communicator's operations, and tickets never left unfinished.
grove_gtest(test_sequencer SOURCES ${CMAKE_CURRENT_LIST_DIR}/sequencer_test.cc
            LIBS grove_core LABELS unit)
# A group's end runs its shares all at once, or none of them.
grove_gtest(test_concurrent_run SOURCES ${CMAKE_CURRENT_LIST_DIR}/concurrent_run_test.cc
            LIBS grove_core LABELS unit)
