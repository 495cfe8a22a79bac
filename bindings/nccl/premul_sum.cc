// The CPU multiply of PreMulSum (see premul_sum.h). Halves and bfloat16s
// are widened to float, multiplied, and rounded back to nearest even.
#include "premul_sum.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/fp16.h"

namespace grove::nccl {
namespace {

float halfToFloat(uint16_t h) { return fp16::halfBitsToFloat(h); }
uint16_t floatToHalf(float f) { return fp16::floatToHalfBits(f); }
float bf16ToFloat(uint16_t b) { return fp16::bf16BitsToFloat(b); }
uint16_t floatToBf16(float f) { return fp16::floatToBf16Bits(f); }

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
