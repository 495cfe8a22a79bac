// NCCL's parameter API (NCCL 2.30: ncclParamBind, ncclParamGet*,
// ncclParamGetParameter, ncclParamGetAllParameterKeys, ncclParamDumpAll)
// over grove's configuration.
//
// How it works: the keys are the NCCL environment names the shim
// translates (env.cc's table: NCCL_DEBUG, NCCL_ALGO, NCCL_SOCKET_IFNAME,
// ...). A key's value is what the library uses now: the grove variable it
// maps onto, read through groveGetConfig (the environment's value, else
// grove's default, as every part of grove reads it), written back in
// NCCL's terms (GROVE_TRANSPORT=socket is NCCL_SHM_DISABLE=1). Lookups are
// live, never a snapshot. An NCCL name grove does not translate is not a
// key: binding it is ncclInvalidArgument, as NCCL answers for a key it does
// not have. A handle is the table row's index (plus one, so none is NULL)
// and stays valid for the library's life. The typed getters parse the value
// as a whole decimal number and refuse one that is not, or that does not fit.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "shim.h"

using namespace grove::nccl;

namespace {

thread_local std::string strValue;                // ncclParamGetStr's answer
thread_local std::string parameterValue;          // ncclParamGetParameter's answer
thread_local std::vector<const char*> keysTable;  // ncclParamGetAllParameterKeys's answer

// The key of handle h, or null for a handle ncclParamBind did not make.
const char* keyOf(ncclParamHandle_t h) {
  const std::vector<const char*> names = ncclNames();
  const uintptr_t i = reinterpret_cast<uintptr_t>(h);
  return i >= 1 && i <= names.size() ? names[i - 1] : nullptr;
}

ncclResult_t valueOf(const char* fn, ncclParamHandle_t h, NcclParam* p) {
  const char* key = keyOf(h);
  if (key == nullptr) return refuse(ncclInvalidArgument, fn, "not a handle from ncclParamBind");
  if (!ncclParam(key, p))
    return refuse(ncclInvalidArgument, fn, std::string(key) + ": " + groveGetLastError(nullptr));
  return ncclSuccess;
}

// Reads handle h as an integer in [lo, hi].
template <typename T>
ncclResult_t getInt(const char* fn, ncclParamHandle_t h, T* out) {
  if (out == nullptr) return refuse(ncclInvalidArgument, fn, "out is NULL");
  NcclParam p;
  if (ncclResult_t r = valueOf(fn, h, &p); r != ncclSuccess) return r;
  const char* text = p.value.c_str();
  char* end = nullptr;
  errno = 0;
  bool ok = !p.value.empty();
  T value{};
  if (std::numeric_limits<T>::is_signed) {
    const long long v = std::strtoll(text, &end, 10);
    ok = ok && errno == 0 && *end == '\0' && v >= std::numeric_limits<T>::min() &&
         v <= std::numeric_limits<T>::max();
    value = static_cast<T>(v);
  } else {
    const unsigned long long v = std::strtoull(text, &end, 10);
    ok =
        ok && errno == 0 && *end == '\0' && p.value[0] != '-' && v <= std::numeric_limits<T>::max();
    value = static_cast<T>(v);
  }
  if (!ok)
    return refuse(ncclInvalidArgument, fn,
                  std::string(keyOf(h)) + " is \"" + p.value + "\", not a number of this type");
  *out = value;
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  return call("ncclParamBind", [&] {
    const char* fn = "ncclParamBind";
    if (out == nullptr) return refuse(ncclInvalidArgument, fn, "out is NULL");
    if (key == nullptr) return refuse(ncclInvalidArgument, fn, "key is NULL");
    const std::vector<const char*> names = ncclNames();
    for (size_t i = 0; i < names.size(); ++i)
      if (std::strcmp(names[i], key) == 0) {
        *out = reinterpret_cast<ncclParamHandle_t>(i + 1);
        return ncclSuccess;
      }
    return refuse(ncclInvalidArgument, fn,
                  std::string(key) +
                      " is not a parameter of grove's library (ncclParamGetAllParameterKeys "
                      "lists them)");
  });
}

ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out) {
  return call("ncclParamGetI8", [&] { return getInt("ncclParamGetI8", h, out); });
}
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out) {
  return call("ncclParamGetI16", [&] { return getInt("ncclParamGetI16", h, out); });
}
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out) {
  return call("ncclParamGetI32", [&] { return getInt("ncclParamGetI32", h, out); });
}
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out) {
  return call("ncclParamGetI64", [&] { return getInt("ncclParamGetI64", h, out); });
}
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out) {
  return call("ncclParamGetU8", [&] { return getInt("ncclParamGetU8", h, out); });
}
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out) {
  return call("ncclParamGetU16", [&] { return getInt("ncclParamGetU16", h, out); });
}
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out) {
  return call("ncclParamGetU32", [&] { return getInt("ncclParamGetU32", h, out); });
}
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out) {
  return call("ncclParamGetU64", [&] { return getInt("ncclParamGetU64", h, out); });
}

ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  return call("ncclParamGetStr", [&] {
    if (out == nullptr) return refuse(ncclInvalidArgument, "ncclParamGetStr", "out is NULL");
    NcclParam p;
    if (ncclResult_t r = valueOf("ncclParamGetStr", h, &p); r != ncclSuccess) return r;
    strValue = p.value;
    *out = strValue.c_str();
    return ncclSuccess;
  });
}

// The value's bytes with their NUL; *len is how many that is (also when
// maxLen is too small, which is refused).
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return call("ncclParamGet", [&] {
    const char* fn = "ncclParamGet";
    if (out == nullptr || len == nullptr)
      return refuse(ncclInvalidArgument, fn, "out or len is NULL");
    NcclParam p;
    if (ncclResult_t r = valueOf(fn, h, &p); r != ncclSuccess) return r;
    const int need = static_cast<int>(p.value.size() + 1);
    *len = need;
    if (maxLen < need)
      return refuse(ncclInvalidArgument, fn,
                    "maxLen " + std::to_string(maxLen) + " is too small (" + std::to_string(need) +
                        " bytes)");
    std::memcpy(out, p.value.c_str(), static_cast<size_t>(need));
    return ncclSuccess;
  });
}

ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  return call("ncclParamGetParameter", [&] {
    const char* fn = "ncclParamGetParameter";
    if (key == nullptr || value == nullptr)
      return refuse(ncclInvalidArgument, fn, "key or value is NULL");
    ncclParamHandle_t h = nullptr;
    if (ncclResult_t r = ncclParamBind(&h, key); r != ncclSuccess) return r;
    NcclParam p;
    if (ncclResult_t r = valueOf(fn, h, &p); r != ncclSuccess) return r;
    parameterValue = p.value;
    *value = parameterValue.c_str();
    if (valueLen != nullptr) *valueLen = static_cast<int>(parameterValue.size());
    return ncclSuccess;
  });
}

ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  return call("ncclParamGetAllParameterKeys", [&] {
    if (table == nullptr || tableLen == nullptr)
      return refuse(ncclInvalidArgument, "ncclParamGetAllParameterKeys",
                    "table or tableLen is NULL");
    keysTable = ncclNames();
    *table = keysTable.data();
    *tableLen = static_cast<int>(keysTable.size());
    return ncclSuccess;
  });
}

// One line per key on stderr: the NCCL value and the grove variable behind it.
void ncclParamDumpAll(void) {
  for (const char* key : ncclNames()) {
    NcclParam p;
    if (ncclParam(key, &p))
      std::fprintf(stderr, "grove nccl: %s=%s (%s=%s)\n", key, p.value.c_str(), p.groveName.c_str(),
                   p.groveValue.c_str());
    else
      std::fprintf(stderr, "grove nccl: %s: %s\n", key, groveGetLastError(nullptr));
  }
}

}  // extern "C"

GROVE_NCCL_PNAME(ParamBind);
GROVE_NCCL_PNAME(ParamGetI8);
GROVE_NCCL_PNAME(ParamGetI16);
GROVE_NCCL_PNAME(ParamGetI32);
GROVE_NCCL_PNAME(ParamGetI64);
GROVE_NCCL_PNAME(ParamGetU8);
GROVE_NCCL_PNAME(ParamGetU16);
GROVE_NCCL_PNAME(ParamGetU32);
GROVE_NCCL_PNAME(ParamGetU64);
GROVE_NCCL_PNAME(ParamGetStr);
GROVE_NCCL_PNAME(ParamGet);
GROVE_NCCL_PNAME(ParamGetParameter);
GROVE_NCCL_PNAME(ParamGetAllParameterKeys);
GROVE_NCCL_PNAME(ParamDumpAll);
