// The CPU multiply of PreMulSum (see premul_sum.h). Halves and bfloat16s
// are widened to float, multiplied, and rounded back to nearest even.
#include "premul_sum.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace grove::nccl {
namespace {

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return bitsToFloat(sign | 0x7f800000 | (mant << 13));  // inf, nan
  if (exp == 0) {  // zero and subnormals: mant * 2^-24
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToHalf(float f) {
  const uint32_t u = floatToBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);  // inf, nan
  if (abs >= 0x477ff000) return sign | 0x7c00;                                   // overflows to inf
  if (abs < 0x38800000) {  // a subnormal half (or zero): round abs * 2^24 to an integer
    const float scaled = bitsToFloat(abs) * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1))) ++m;
    return sign | static_cast<uint16_t>(m);
  }
  const uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);  // to nearest even at bit 13
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

float bf16ToFloat(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

uint16_t floatToBf16(float f) {
  const uint32_t u = floatToBits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);  // nan
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

template <typename T>
void scaleWrapping(void* dst, const void* src, size_t n, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof s);
  const auto* in = static_cast<const T*>(src);
  auto* out = static_cast<T*>(dst);
  using U = std::make_unsigned_t<T>;  // unsigned products wrap without undefined behaviour
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<U>(in[i]) * static_cast<U>(s));
}

template <typename T>
void scaleFloating(void* dst, const void* src, size_t n, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof s);
  const auto* in = static_cast<const T*>(src);
  auto* out = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = in[i] * s;
}

template <float (*toFloat)(uint16_t), uint16_t (*fromFloat)(float)>
void scaleNarrow(void* dst, const void* src, size_t n, const void* scalar) {
  uint16_t raw;
  std::memcpy(&raw, scalar, sizeof raw);
  const float s = toFloat(raw);
  const auto* in = static_cast<const uint16_t*>(src);
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = fromFloat(toFloat(in[i]) * s);
}

}  // namespace

size_t arithmeticBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

void scaleInto(void* dst, const void* src, size_t n, ncclDataType_t type, const void* scalar) {
  switch (type) {
    case ncclInt8: return scaleWrapping<int8_t>(dst, src, n, scalar);
    case ncclUint8: return scaleWrapping<uint8_t>(dst, src, n, scalar);
    case ncclInt32: return scaleWrapping<int32_t>(dst, src, n, scalar);
    case ncclUint32: return scaleWrapping<uint32_t>(dst, src, n, scalar);
    case ncclInt64: return scaleWrapping<int64_t>(dst, src, n, scalar);
    case ncclUint64: return scaleWrapping<uint64_t>(dst, src, n, scalar);
    case ncclFloat16: return scaleNarrow<halfToFloat, floatToHalf>(dst, src, n, scalar);
    case ncclBfloat16: return scaleNarrow<bf16ToFloat, floatToBf16>(dst, src, n, scalar);
    case ncclFloat32: return scaleFloating<float>(dst, src, n, scalar);
    case ncclFloat64: return scaleFloating<double>(dst, src, n, scalar);
    default: return;
  }
}

}  // namespace grove::nccl
