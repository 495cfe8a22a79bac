// reduce_scatter_perf: nccl-tests-compatible benchmark of one collective (see perf/common/harness.h).
#include "perf/common/harness.h"

int main(int argc, char** argv) {
  return grove::perf::perfMain(argc, argv, grove::perf::CollKind::kReduceScatter);
}
