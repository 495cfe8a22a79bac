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

/// Element `index` of `buf` (elements of type t) as a double: exact for
/// every float16, bfloat16, float and double, and for integers up to 2^53;
/// 0 for an invalid type. The checks of programs and tests read values so.
double elementAsDouble(groveDataType_t t, const void* buf, size_t index);
/// Stores `v` into element `index` of `buf` as type t: floating types round
/// to nearest even, integer types take v's integer part, wrapped to the
/// type's width (negative values as two's complement). Invalid types: nothing.
void storeElement(groveDataType_t t, double v, void* buf, size_t index);

/// True for the 5 valid ops.
bool opValid(int op);
/// Name of an op: sum prod max min avg.
const char* opName(groveRedOp_t op);
/// Parses an op name.
std::optional<groveRedOp_t> parseOp(const std::string& name);

}  // namespace grove
