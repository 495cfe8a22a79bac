#include "base/dtype.h"

#include <strings.h>

#include <cstdint>
#include <cstring>

#include "base/fp16.h"

namespace grove {
namespace {
struct TypeInfo {
  groveDataType_t t;
  size_t size;
  const char* name;
  bool isFloat;
};
const TypeInfo kTypes[] = {
    {groveInt8, 1, "int8", false},     {groveUint8, 1, "uint8", false},
    {groveInt32, 4, "int32", false},   {groveUint32, 4, "uint32", false},
    {groveInt64, 8, "int64", false},   {groveUint64, 8, "uint64", false},
    {groveFloat16, 2, "half", true},   {groveFloat32, 4, "float", true},
    {groveFloat64, 8, "double", true}, {groveBfloat16, 2, "bfloat16", true},
};
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};
}  // namespace

bool dtypeValid(int t) { return t >= 0 && t < groveNumTypes; }
size_t dtypeSize(groveDataType_t t) { return dtypeValid(t) ? kTypes[t].size : 0; }
bool dtypeIsFloat(groveDataType_t t) { return dtypeValid(t) && kTypes[t].isFloat; }
const char* dtypeName(groveDataType_t t) { return dtypeValid(t) ? kTypes[t].name : "invalid"; }

std::optional<groveDataType_t> parseDtype(const std::string& name) {
  for (const TypeInfo& ti : kTypes)
    if (strcasecmp(name.c_str(), ti.name) == 0) return ti.t;
  struct Alias {
    const char* name;
    groveDataType_t t;
  };
  static const Alias aliases[] = {{"char", groveInt8},       {"int", groveInt32},
                                  {"float16", groveFloat16}, {"fp16", groveFloat16},
                                  {"float32", groveFloat32}, {"fp32", groveFloat32},
                                  {"float64", groveFloat64}, {"fp64", groveFloat64},
                                  {"bf16", groveBfloat16},   {"bfloat", groveBfloat16}};
  for (const Alias& a : aliases)
    if (strcasecmp(name.c_str(), a.name) == 0) return a.t;
  return std::nullopt;
}

bool opValid(int op) { return op >= 0 && op < groveNumOps; }
const char* opName(groveRedOp_t op) { return opValid(op) ? kOpNames[op] : "invalid"; }
std::optional<groveRedOp_t> parseOp(const std::string& name) {
  for (int i = 0; i < groveNumOps; ++i)
    if (strcasecmp(name.c_str(), kOpNames[i]) == 0) return static_cast<groveRedOp_t>(i);
  return std::nullopt;
}

namespace {
template <typename T>
T loadAs(const void* buf, size_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + index * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void storeAs(void* buf, size_t index, T v) {
  std::memcpy(static_cast<char*>(buf) + index * sizeof(T), &v, sizeof(T));
}
/// v's integer part as the low 64 bits of its two's complement.
uint64_t integerBits(double v) {
  return v < 0 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v);
}
}  // namespace

double elementAsDouble(groveDataType_t t, const void* buf, size_t index) {
  switch (t) {
    case groveInt8: return loadAs<int8_t>(buf, index);
    case groveUint8: return loadAs<uint8_t>(buf, index);
    case groveInt32: return loadAs<int32_t>(buf, index);
    case groveUint32: return loadAs<uint32_t>(buf, index);
    case groveInt64: return static_cast<double>(loadAs<int64_t>(buf, index));
    case groveUint64: return static_cast<double>(loadAs<uint64_t>(buf, index));
    case groveFloat16: return fp16::halfBitsToFloat(loadAs<uint16_t>(buf, index));
    case groveBfloat16: return fp16::bf16BitsToFloat(loadAs<uint16_t>(buf, index));
    case groveFloat32: return loadAs<float>(buf, index);
    case groveFloat64: return loadAs<double>(buf, index);
    default: return 0;
  }
}

void storeElement(groveDataType_t t, double v, void* buf, size_t index) {
  switch (t) {
    case groveInt8:
    case groveUint8: storeAs(buf, index, static_cast<uint8_t>(integerBits(v))); break;
    case groveInt32:
    case groveUint32: storeAs(buf, index, static_cast<uint32_t>(integerBits(v))); break;
    case groveInt64:
    case groveUint64: storeAs(buf, index, integerBits(v)); break;
    case groveFloat16: storeAs(buf, index, fp16::floatToHalfBits(static_cast<float>(v))); break;
    case groveBfloat16: storeAs(buf, index, fp16::floatToBf16Bits(static_cast<float>(v))); break;
    case groveFloat32: storeAs(buf, index, static_cast<float>(v)); break;
    case groveFloat64: storeAs(buf, index, v); break;
    default: break;
  }
}

}  // namespace grove
