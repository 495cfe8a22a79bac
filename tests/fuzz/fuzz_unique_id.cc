// libFuzzer target: decoding a groveUniqueId (core/unique_id.h), the bytes a
// rank receives from whoever started the job. Any 128 bytes must decode or
// be refused with grove::Error(groveInvalidArgument); a decoded id must
// encode back to bytes that decode to the same id.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "core/unique_id.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  groveUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::memcpy(&id, data, size < sizeof id ? size : sizeof id);
  try {
    grove::core::UniqueIdData d = grove::core::decodeUniqueId(id);
    groveUniqueId again;
    grove::core::encodeUniqueId(d, &again);
    grove::core::UniqueIdData e = grove::core::decodeUniqueId(again);
    if (e.secret != d.secret || e.nonce != d.nonce || e.fromEnv != d.fromEnv) __builtin_trap();
  } catch (const grove::Error& e) {
    if (e.code() != groveInvalidArgument) __builtin_trap();
  }
  return 0;
}
