// comm.cc - SharedComm and the torch -> grove type and op mapping.
#include "comm.h"

#include <climits>
#include <cstring>
#include <stdexcept>

namespace grove::pytorch {

SharedComm::SharedComm(groveComm_t comm) : comm_(comm) {}

SharedComm::~SharedComm() { destroy(); }

void SharedComm::abort(const std::string& why) {
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (destroyed_ || aborted_.load()) return;
    abortReason_ = why;
    aborted_.store(true);
    // grove stops the running call (it sees the abort at its next wait), tells
    // the other ranks, and frees the handle: later calls with it fail with
    // grove's "destroyed" error (it remembers the handles it freed lately).
    groveCommAbort(comm_);
    destroyed_ = true;
    hook = std::move(abortHook_);
  }
  if (hook) hook(why);
}

void SharedComm::setAbortHook(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  abortHook_ = std::move(hook);
}

void SharedComm::destroy() {
  std::lock_guard<std::mutex> lock(mu_);
  if (destroyed_) return;
  destroyed_ = true;
  groveCommDestroy(comm_);
}

std::string SharedComm::abortReason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abortReason_;
}

groveComm_t joinGroup(const c10::intrusive_ptr<::c10d::Store>& store, const std::string& key,
                      int rank, int size, const groveConfig_t& config, const std::string& what) {
  groveUniqueId id;
  if (rank == 0) {
    groveResult_t r = groveGetUniqueId(&id);
    TORCH_CHECK(r == groveSuccess, "grove: groveGetUniqueId failed: ", groveGetErrorString(r), " (",
                groveGetLastError(nullptr), ")");
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(key, std::vector<uint8_t>(bytes, bytes + GROVE_UNIQUE_ID_BYTES));
  } else {
    std::vector<uint8_t> bytes = store->get(key);  // waits up to the store's timeout
    TORCH_CHECK(bytes.size() == GROVE_UNIQUE_ID_BYTES, "grove: the store's ", key, " holds ",
                bytes.size(), " bytes, expected ", GROVE_UNIQUE_ID_BYTES);
    std::memcpy(id.internal, bytes.data(), GROVE_UNIQUE_ID_BYTES);
  }
  groveConfig_t copy = config;
  groveComm_t comm = nullptr;
  groveResult_t r = groveCommInitRankConfig(&comm, size, id, rank, &copy);
  TORCH_CHECK(r == groveSuccess, "grove: joining ", what, " (rank ", rank, " of ", size,
              ") failed: ", groveGetErrorString(r), " (", groveGetLastError(nullptr), ")");
  return comm;
}

std::runtime_error groveFailure(const std::string& what, groveComm_t comm, groveResult_t result) {
  std::string msg = "grove: " + what + " failed: " + groveGetErrorString(result);
  std::string detail = groveGetLastError(comm);
  if (!detail.empty()) msg += " (" + detail + ")";
  return std::runtime_error(msg);
}

void SharedComm::check(groveResult_t result, const char* what) const {
  if (result == groveSuccess) return;
  std::string msg = groveFailure(what, comm_, result).what();
  if (aborted_.load()) msg += "; the process group was aborted: " + abortReason();
  throw std::runtime_error(msg);
}

groveDataType_t groveTypeOf(const at::Tensor& tensor, const char* op) {
  switch (tensor.scalar_type()) {
    case at::kChar: return groveInt8;
    case at::kByte: return groveUint8;
    case at::kBool: return groveUint8;  // 0/1 bytes; reductions map to max/min
    case at::kInt: return groveInt32;
    case at::kLong: return groveInt64;
    case at::kHalf: return groveFloat16;
    case at::kFloat: return groveFloat32;
    case at::kDouble: return groveFloat64;
    case at::kBFloat16: return groveBfloat16;
    default:
      TORCH_CHECK(false, "grove: ", op, " does not support dtype ", tensor.scalar_type(),
                  " (supported: int8, uint8, bool, int32, int64, float16, bfloat16, float32, "
                  "float64)");
  }
}

groveRedOp_t groveOpOf(const ::c10d::ReduceOp& op, const at::Tensor& tensor, const char* what) {
  bool isBool = tensor.scalar_type() == at::kBool;
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      // As torch's NCCL backend: a bool sum is "any" (max), a product "all" (min).
      return isBool ? groveMax : groveSum;
    case ::c10d::ReduceOp::PRODUCT: return isBool ? groveMin : groveProd;
    case ::c10d::ReduceOp::MIN: return groveMin;
    case ::c10d::ReduceOp::MAX: return groveMax;
    case ::c10d::ReduceOp::BOR:
      TORCH_CHECK(isBool, "grove: ", what, " supports BOR on bool tensors only");
      return groveMax;
    case ::c10d::ReduceOp::BAND:
      TORCH_CHECK(isBool, "grove: ", what, " supports BAND on bool tensors only");
      return groveMin;
    case ::c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "grove: ", what, " cannot average bool tensors");
      return groveAvg;
    default:
      TORCH_CHECK(false, "grove: ", what, " does not support ReduceOp ", static_cast<int>(op.op_),
                  " (supported: SUM, PRODUCT, MIN, MAX, AVG; BAND and BOR on bool)");
  }
}

void checkTensor(const at::Tensor& tensor, const char* op) {
  TORCH_CHECK(tensor.defined(), "grove: ", op, " got an undefined tensor");
  TORCH_CHECK(tensor.layout() == at::kStrided, "grove: ", op, " supports dense tensors only (got ",
              tensor.layout(), ")");
  TORCH_CHECK(tensor.device().is_cpu() || tensor.device().is_cuda(), "grove: ", op,
              " supports CPU and CUDA tensors (got a tensor on ", tensor.device(), ")");
  groveTypeOf(tensor, op);
}

int timeoutMsOf(std::chrono::milliseconds timeout) {
  auto ms = timeout.count();
  if (ms < 1) return 1;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

}  // namespace grove::pytorch
