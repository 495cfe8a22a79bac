// Element types, exact input values and reference reductions for the
// multi-process checker (grove_mp_check). Public API only: this file needs
// nothing from the library but grove.h's enumerators.
//
// How the values stay exact: every input is a small integer chosen per
// (dtype, op) so that any order of reduction gives the same bits in every
// type, half and bfloat16 included, with up to 8 ranks:
//   sum   signed/float [-4,3], unsigned [0,7]            (|sum| <= 32)
//   avg   integers [0,7] (integer division of the sum, exercises truncation);
//         floats n*[-4,3] so the sum is a multiple of nranks (|sum| <= 256)
//   prod  1 or -1, and 2 on ranks < 6 only                (|prod| <= 64)
//   max/min  wide values: full range for 32/64-bit integers, [-120,120] for
//         8-bit and 16-bit floats, quarter-integers for float32/64
//   data movement (broadcast, gathers, all-to-all, send/recv): random bytes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/dtype.h"
#include "grove/grove.h"

namespace mp {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
inline uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
  return mix64(a * 0x9e3779b97f4a7c15ull ^ mix64(b + 0x632be59bd9b4e019ull) ^ (c << 1));
}

// ------------------------------------------------------------ dtype table
inline const int kAllDtypes[] = {groveInt8,    groveUint8,   groveInt32,   groveUint32,
                                 groveInt64,   groveUint64,  groveFloat16, groveFloat32,
                                 groveFloat64, groveBfloat16};
inline const int kAllOps[] = {groveSum, groveProd, groveMax, groveMin, groveAvg};

inline size_t dtypeSize(int dt) {
  switch (dt) {
    case groveInt8:
    case groveUint8: return 1;
    case groveFloat16:
    case groveBfloat16: return 2;
    case groveInt32:
    case groveUint32:
    case groveFloat32: return 4;
    default: return 8;
  }
}
inline const char* dtypeName(int dt) {
  static const char* names[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                "uint64", "float16", "float32", "float64", "bfloat16"};
  return dt >= 0 && dt < 10 ? names[dt] : "?";
}
inline const char* opName(int op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < 5 ? names[op] : "-";
}
inline bool isFloat(int dt) {
  return dt == groveFloat16 || dt == groveFloat32 || dt == groveFloat64 || dt == groveBfloat16;
}
inline bool isSigned(int dt) {
  return isFloat(dt) || dt == groveInt8 || dt == groveInt32 || dt == groveInt64;
}

/// Element at p as a double (floats) -- for printing and float comparisons.
inline double toDouble(int dt, const uint8_t* p) {
  return grove::elementAsDouble(static_cast<groveDataType_t>(dt), p, 0);
}

/// Printable element: the value and its bits.
inline std::string formatElem(int dt, const uint8_t* p) {
  char buf[96];
  uint64_t bits = 0;
  std::memcpy(&bits, p, dtypeSize(dt));
  if (dt == groveInt64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    snprintf(buf, sizeof buf, "%lld (0x%llx)", (long long)v, (unsigned long long)bits);
  } else if (dt == groveUint64) {
    snprintf(buf, sizeof buf, "%llu (0x%llx)", (unsigned long long)bits, (unsigned long long)bits);
  } else {
    snprintf(buf, sizeof buf, "%.9g (0x%llx)", toDouble(dt, p), (unsigned long long)bits);
  }
  return buf;
}

// Integer-valued storage of a double v for every type (v exact in the type).
inline void storeValue(int dt, double v, uint8_t* p) {
  grove::storeElement(static_cast<groveDataType_t>(dt), v, p, 0);
}

/// Kind of input a case needs.
enum class Kind { kRaw, kSum, kAvg, kProd, kMinMax };

inline Kind kindOf(bool reducing, int op) {
  if (!reducing) return Kind::kRaw;
  switch (op) {
    case groveSum: return Kind::kSum;
    case groveAvg: return Kind::kAvg;
    case groveProd: return Kind::kProd;
    default: return Kind::kMinMax;
  }
}

/// The input element of `rank` for hash h (see the file comment).
inline void makeInput(int dt, Kind kind, int rank, int nranks, uint64_t h, uint8_t* p) {
  const bool sgn = isSigned(dt), flt = isFloat(dt);
  switch (kind) {
    case Kind::kRaw: {
      uint64_t bits = h;
      std::memcpy(p, &bits, dtypeSize(dt));
      return;
    }
    case Kind::kSum:
      storeValue(dt, sgn ? static_cast<double>(h % 8) - 4.0 : static_cast<double>(h % 8), p);
      return;
    case Kind::kAvg:
      storeValue(dt, flt ? (static_cast<double>(h % 8) - 4.0) * nranks : static_cast<double>(h % 8),
                 p);
      return;
    case Kind::kProd: {
      double v = (rank < 6 && h % 3 == 0) ? 2.0 : 1.0;
      if (sgn && ((h >> 8) & 1)) v = -v;
      storeValue(dt, v, p);
      return;
    }
    case Kind::kMinMax: {
      if (dt == groveInt32 || dt == groveUint32 || dt == groveInt64 || dt == groveUint64) {
        uint64_t bits = h;
        std::memcpy(p, &bits, dtypeSize(dt));
      } else if (dt == groveFloat32 || dt == groveFloat64) {
        storeValue(dt, (static_cast<double>(h % 8000001) - 4000000.0) * 0.25, p);
      } else if (dt == groveUint8) {
        storeValue(dt, static_cast<double>(h % 241), p);
      } else {
        storeValue(dt, static_cast<double>(h % 241) - 120.0, p);
      }
      return;
    }
  }
}

/// out = op over the n elements at ins[0..n) (each one element of type dt),
/// computed exactly (the inputs guarantee no rounding and no overflow).
inline void referenceReduce(int dt, int op, const uint8_t* const* ins, int n, uint8_t* out) {
  if (isFloat(dt)) {
    double acc = toDouble(dt, ins[0]);
    for (int r = 1; r < n; ++r) {
      double v = toDouble(dt, ins[r]);
      switch (op) {
        case groveSum:
        case groveAvg: acc += v; break;
        case groveProd: acc *= v; break;
        case groveMax: acc = v > acc ? v : acc; break;
        case groveMin: acc = v < acc ? v : acc; break;
      }
    }
    if (op == groveAvg) acc /= n;
    storeValue(dt, acc, out);
    return;
  }
  const size_t es = dtypeSize(dt);
  auto load = [&](const uint8_t* p, int64_t* s, uint64_t* u) {
    switch (dt) {
      case groveInt8: *s = static_cast<int8_t>(*p); break;
      case groveUint8: *u = *p; break;
      case groveInt32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        *s = v;
        break;
      }
      case groveUint32: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        *u = v;
        break;
      }
      case groveInt64: std::memcpy(s, p, 8); break;
      case groveUint64: std::memcpy(u, p, 8); break;
    }
  };
  if (isSigned(dt)) {
    int64_t acc = 0, v = 0;
    uint64_t dummy = 0;
    load(ins[0], &acc, &dummy);
    for (int r = 1; r < n; ++r) {
      load(ins[r], &v, &dummy);
      switch (op) {
        case groveSum:
        case groveAvg: acc += v; break;
        case groveProd: acc *= v; break;
        case groveMax: acc = v > acc ? v : acc; break;
        case groveMin: acc = v < acc ? v : acc; break;
      }
    }
    if (op == groveAvg) acc /= n;
    std::memcpy(out, &acc, es);  // little-endian truncation
  } else {
    uint64_t acc = 0, v = 0;
    int64_t dummy = 0;
    load(ins[0], &dummy, &acc);
    for (int r = 1; r < n; ++r) {
      load(ins[r], &dummy, &v);
      switch (op) {
        case groveSum:
        case groveAvg: acc += v; break;
        case groveProd: acc *= v; break;
        case groveMax: acc = v > acc ? v : acc; break;
        case groveMin: acc = v < acc ? v : acc; break;
      }
    }
    if (op == groveAvg) acc /= static_cast<uint64_t>(n);
    std::memcpy(out, &acc, es);
  }
}

}  // namespace mp
