// mpi_perf: the peer harness for MPI (built twice: ompi_perf against Open MPI,
// mpich_perf against MPICH), run under that MPI's own launcher:
//
//   mpirun.openmpi -np 4 --mca btl self,vader build/compare/ompi_perf all_reduce -b 8 -e 128M -f 4
//   mpiexec.mpich -n 4 build/compare/mpich_perf broadcast -b 8 -e 128M -f 4
//
// How it works: MPI_Allreduce, MPI_Bcast, MPI_Allgather, MPI_Reduce and
// MPI_Reduce_scatter_block on MPI_COMM_WORLD (errors returned, not fatal),
// with nccl-tests' in-place forms mapped to MPI_IN_PLACE. MPI_Bcast has one
// buffer, so broadcast has only the in-place column; MPI's in-place
// reduce-scatter leaves the result at the start of the buffer, not at the
// rank's block, so reduce-scatter has only the out-of-place column. MPI has
// no avg op and no half types: asking for them is an error.
#include <mpi.h>

#include <climits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "perf/compare/peer_harness.h"

namespace grove::perf::compare {
namespace {

MPI_Datatype mpiType(groveDataType_t t) {
  switch (t) {
    case groveInt8: return MPI_INT8_T;
    case groveUint8: return MPI_UINT8_T;
    case groveInt32: return MPI_INT32_T;
    case groveUint32: return MPI_UINT32_T;
    case groveInt64: return MPI_INT64_T;
    case groveUint64: return MPI_UINT64_T;
    case groveFloat32: return MPI_FLOAT;
    case groveFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(groveRedOp_t op) {
  switch (op) {
    case groveSum: return MPI_SUM;
    case groveProd: return MPI_PROD;
    case groveMax: return MPI_MAX;
    case groveMin: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(what) + " failed: " + text);
}

/// The MPI library behind MPI_COMM_WORLD.
class MpiBackend : public PeerBackend {
 public:
  void start() override {
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
  }
  void stop() override { MPI_Finalize(); }
  void abort() override {
    int started = 0;
    MPI_Initialized(&started);
    if (started) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  std::string describe() const override {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    MPI_Get_library_version(text, &len);
    std::string s(text);
    s = s.substr(0, s.find_first_of(",\n"));
    for (char& c : s)
      if (c == '\t') c = ' ';
    return s;
  }

  std::string unsupported(CollKind kind, groveDataType_t type, groveRedOp_t op) const override {
    if (kind != CollKind::kAllReduce && kind != CollKind::kBroadcast &&
        kind != CollKind::kAllGather && kind != CollKind::kReduce &&
        kind != CollKind::kReduceScatter)
      return "this harness does not run " + std::string(collName(kind));
    if (mpiType(type) == MPI_DATATYPE_NULL) return "MPI has no half or bfloat16 type";
    if (collHasOp(kind) && mpiOp(op) == MPI_OP_NULL) return "MPI has no avg op";
    return "";
  }

  bool hasVariant(CollKind kind, bool inPlace) const override {
    if (kind == CollKind::kBroadcast) return inPlace;
    if (kind == CollKind::kReduceScatter) return !inPlace;
    return true;
  }

  void run(CollKind kind, const void* send, void* recv, size_t count, groveDataType_t type,
           groveRedOp_t op, int root, bool inPlace) override {
    if (count > static_cast<size_t>(INT_MAX)) throw std::runtime_error("count above INT_MAX");
    const int n = static_cast<int>(count);
    const MPI_Datatype t = mpiType(type);
    const MPI_Op o = mpiOp(op);
    const void* in = inPlace ? MPI_IN_PLACE : send;
    switch (kind) {
      case CollKind::kAllReduce:
        check(MPI_Allreduce(in, recv, n, t, o, MPI_COMM_WORLD), "MPI_Allreduce");
        return;
      case CollKind::kBroadcast:  // one buffer: the root's data is already in recv
        check(MPI_Bcast(recv, n, t, root, MPI_COMM_WORLD), "MPI_Bcast");
        return;
      case CollKind::kAllGather:
        if (inPlace)
          check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, MPI_COMM_WORLD),
                "MPI_Allgather");
        else
          check(MPI_Allgather(send, n, t, recv, n, t, MPI_COMM_WORLD), "MPI_Allgather");
        return;
      case CollKind::kReduce:
        if (rank_ == root)
          check(MPI_Reduce(in, recv, n, t, o, root, MPI_COMM_WORLD), "MPI_Reduce");
        else  // recvbuf is not significant here, but MPICH writes to it: give it scratch
          check(MPI_Reduce(send, scratch(n, t), n, t, o, root, MPI_COMM_WORLD), "MPI_Reduce");
        return;
      case CollKind::kReduceScatter:
        check(MPI_Reduce_scatter_block(send, recv, n, t, o, MPI_COMM_WORLD),
              "MPI_Reduce_scatter_block");
        return;
      default: throw std::runtime_error("unsupported collective");
    }
  }

 private:
  void* scratch(int n, MPI_Datatype t) {
    int size = 0;
    MPI_Type_size(t, &size);
    scratch_.resize(static_cast<size_t>(n) * static_cast<size_t>(size) + 1);
    return scratch_.data();
  }

  std::vector<char> scratch_;
  int rank_ = 0;
  int nranks_ = 1;
};

std::unique_ptr<PeerBackend> makeMpi(const PeerOptions&) { return std::make_unique<MpiBackend>(); }

}  // namespace
}  // namespace grove::perf::compare

int main(int argc, char** argv) {
  return grove::perf::compare::peerMain(argc, argv, grove::perf::compare::makeMpi);
}
