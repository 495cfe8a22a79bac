#include "base/dtype.h"

#include <strings.h>

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

}  // namespace grove
