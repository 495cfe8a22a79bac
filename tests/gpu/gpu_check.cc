// Helpers of the GPU tests (see gpu_check.h).
#include "gpu_check.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>

#include "base/dtype.h"
#include "kernels/cpu/reduce.h"

namespace grove::gputest {

void cudaOk(int err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(static_cast<cudaError_t>(err)));
  }
}

namespace {

template <class T>
void put(std::vector<unsigned char>& out, size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

bool isNan(groveDataType_t t, const unsigned char* p) {
  switch (t) {
    case groveFloat16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return (b & 0x7fffu) > 0x7c00u;
    }
    case groveBfloat16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return (b & 0x7fffu) > 0x7f80u;
    }
    case groveFloat32: {
      uint32_t b;
      std::memcpy(&b, p, 4);
      return (b & 0x7fffffffu) > 0x7f800000u;
    }
    case groveFloat64: {
      uint64_t b;
      std::memcpy(&b, p, 8);
      return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    }
    default: return false;
  }
}

}  // namespace

std::vector<unsigned char> makeInput(groveDataType_t t, size_t count, uint64_t seed) {
  const size_t esz = dtypeSize(t);
  std::vector<unsigned char> out(count * esz);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  const bool special = dtypeIsFloat(t);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    const bool pick = special && (r & 31) == 0;
    const int which = static_cast<int>((r >> 5) % 8);
    switch (t) {
      case groveFloat16: {
        static const uint16_t kSpecial[8] = {0x0000, 0x8000, 0x7c00, 0xfc00,
                                             0x7e00, 0x7c01, 0x0001, 0x7bff};
        put<uint16_t>(
            out, i, pick ? kSpecial[which] : kernels::floatToHalf(static_cast<float>(value(rng))));
        break;
      }
      case groveBfloat16: {
        static const uint16_t kSpecial[8] = {0x0000, 0x8000, 0x7f80, 0xff80,
                                             0x7fc0, 0x7f81, 0x0001, 0x7f7f};
        put<uint16_t>(
            out, i, pick ? kSpecial[which] : kernels::floatToBf16(static_cast<float>(value(rng))));
        break;
      }
      case groveFloat32: {
        static const uint32_t kSpecial[8] = {0x0,         0x80000000u, 0x7f800000u, 0xff800000u,
                                             0x7fc00000u, 0x7f800001u, 0x00000003u, 0x7f7fffffu};
        float f = static_cast<float>(value(rng));
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        put<uint32_t>(out, i, pick ? kSpecial[which] : bits);
        break;
      }
      case groveFloat64: {
        static const uint64_t kSpecial[8] = {0x0,
                                             0x8000000000000000ull,
                                             0x7ff0000000000000ull,
                                             0xfff0000000000000ull,
                                             0x7ff8000000000000ull,
                                             0x7ff0000000000001ull,
                                             0x3ull,
                                             0x7fefffffffffffffull};
        double d = value(rng);
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        put<uint64_t>(out, i, pick ? kSpecial[which] : bits);
        break;
      }
      default:  // integers: every bit pattern (sums and products wrap)
        std::memcpy(out.data() + i * esz, &r, esz);
        break;
    }
  }
  return out;
}

bool sameElement(groveDataType_t t, groveRedOp_t op, const unsigned char* got,
                 const unsigned char* want) {
  const size_t esz = dtypeSize(t);
  if (std::memcmp(got, want, esz) == 0) return true;
  const bool arithmetic = op == groveSum || op == groveProd || op == groveAvg;
  return arithmetic && isNan(t, got) && isNan(t, want);
}

std::string elementHex(groveDataType_t t, const unsigned char* p) {
  const size_t esz = dtypeSize(t);
  std::string s = "0x";
  char buf[4];
  for (size_t i = esz; i-- > 0;) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    s += buf;
  }
  return s;
}

std::string compareElements(groveDataType_t t, groveRedOp_t op, const unsigned char* got,
                            const unsigned char* want, size_t count) {
  const size_t esz = dtypeSize(t);
  std::string msg;
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (sameElement(t, op, got + i * esz, want + i * esz)) continue;
    if (++bad <= 4) {
      msg += " [" + std::to_string(i) + "] got " + elementHex(t, got + i * esz) + " want " +
             elementHex(t, want + i * esz);
    }
  }
  if (bad > 0) msg = std::to_string(bad) + " wrong:" + msg;
  return msg;
}

std::string checkGuards(const std::vector<unsigned char>& buf, size_t from, size_t len) {
  for (size_t i = 0; i < buf.size(); ++i) {
    if (i >= from && i < from + len) continue;
    if (buf[i] != kGuard)
      return "byte " + std::to_string(i) + " outside the destination was written";
  }
  return "";
}

}  // namespace grove::gputest
