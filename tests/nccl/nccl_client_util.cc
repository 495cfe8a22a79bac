// The checks' tally and the element helpers nccl_client's parts share.
#include "nccl_client.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace nccl_client {

int rank = 0, nranks = 1, checks = 0, failures = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (ok) return;
  ++failures;
  if (failures <= 20) std::fprintf(stderr, "nccl_client: rank %d: FAILED %s\n", rank, what.c_str());
}

bool ok(ncclResult_t r, const char* what, ncclComm_t comm) {
  expect(r == ncclSuccess,
         std::string(what) + " returned " + std::to_string(r) + ": " + ncclGetLastError(comm));
  return r == ncclSuccess;
}

size_t bytesOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

void put(void* base, size_t i, ncclDataType_t t, double v) {
  char* p = static_cast<char*>(base) + i * bytesOf(t);
  const float f = static_cast<float>(v);
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  switch (t) {
    case ncclInt8:
    case ncclUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case ncclInt32:
    case ncclUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclInt64:
    case ncclUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case ncclFloat32: std::memcpy(p, &f, 4); break;
    case ncclFloat64: std::memcpy(p, &v, 8); break;
    case ncclBfloat16: {
      uint16_t x = static_cast<uint16_t>(fb >> 16);
      std::memcpy(p, &x, 2);
      break;
    }
    case ncclFloat16: {  // exact for small integers: rebias the exponent, drop 13 zero bits
      uint16_t x =
          v == 0 ? 0
                 : static_cast<uint16_t>((((fb >> 23) & 0xff) - 112) << 10 | (fb & 0x7fffff) >> 13);
      std::memcpy(p, &x, 2);
      break;
    }
    default: break;
  }
}

bool same(const void* a, size_t ai, const void* b, size_t bi, ncclDataType_t t) {
  const size_t s = bytesOf(t);
  return std::memcmp(static_cast<const char*>(a) + ai * s, static_cast<const char*>(b) + bi * s,
                     s) == 0;
}

double value(int r, size_t i) {
  if (r > 0) return 1 + static_cast<double>((r + i) % 3);
  double others = 0;
  for (int q = 1; q < nranks; ++q) others += value(q, i);
  const double total = nranks * static_cast<double>(static_cast<long>(others / nranks) + 1);
  return total - others;  // in 1..n
}

double reduceOf(ncclRedOp_t op, size_t i) {
  double acc = value(0, i);
  for (int r = 1; r < nranks; ++r) {
    const double v = value(r, i);
    if (op == ncclSum || op == ncclAvg) acc += v;
    if (op == ncclProd) acc *= v;
    if (op == ncclMax) acc = acc > v ? acc : v;
    if (op == ncclMin) acc = acc < v ? acc : v;
  }
  return op == ncclAvg ? acc / nranks : acc;
}

void expectMakesNothing(ncclComm_t comm, const std::string& state) {
  const std::string a = "a " + state + " communicator ";
  ncclComm_t none = nullptr;
  expect(ncclCommSplit(comm, 0, rank, &none, nullptr) == ncclInvalidUsage && none == nullptr &&
             std::strstr(ncclGetLastError(comm), state.c_str()) != nullptr,
         a + "refuses a split, saying why");
  void* handle = nullptr;
  std::vector<char> buf(64);
  expect(ncclCommRegister(comm, buf.data(), buf.size(), &handle) == ncclInvalidUsage,
         a + "registers nothing");
  float scale = 2.0f;
  ncclRedOp_t op;
  expect(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, comm) ==
             ncclInvalidUsage,
         a + "makes no PreMulSum op");
}

}  // namespace nccl_client
