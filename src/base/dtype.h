// Facts about grove's data types and reduction ops: sizes, names, parsing.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "grove/grove.h"

namespace grove {

/// Size in bytes of one element of `t` (0 for an invalid type).
size_t dtypeSize(groveDataType_t t);
/// True for the 10 valid data types.
bool dtypeValid(int t);
/// True for float16, float32, float64, bfloat16.
bool dtypeIsFloat(groveDataType_t t);
/// nccl-tests' name of a type: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
const char* dtypeName(groveDataType_t t);
/// Parses a type name (nccl-tests' names and a few aliases such as float32, fp16, bf16).
std::optional<groveDataType_t> parseDtype(const std::string& name);

/// True for the 5 valid ops.
bool opValid(int op);
/// Name of an op: sum prod max min avg.
const char* opName(groveRedOp_t op);
/// Parses an op name.
std::optional<groveRedOp_t> parseOp(const std::string& name);

}  // namespace grove
