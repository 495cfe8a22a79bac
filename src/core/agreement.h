// Settings every rank of a communicator must share, checked when it is made.
//
// How it works: each rank lists the settings that shape its schedules and
// links (buffer and chunk sizes, channels, transport, algorithm overrides,
// the selector's thresholds, the device kind, grove's version) as
// name=value text, and the ranks all-gather those lists over the bootstrap.
// Every rank compares every rank's list with rank 0's in the same order, so
// all of them fail alike, with the same message naming the setting, the
// ranks and their values, instead of exchanging data in two layouts and
// returning wrong results (or hanging) as success.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/options.h"

namespace grove::core {

/// One setting that must agree: its GROVE_* name and its value as text.
struct AgreedSetting {
  std::string name;
  std::string value;
};

/// The settings of a communicator with `options` that every rank must share.
std::vector<AgreedSetting> agreedSettings(const CommOptions& options);

/// All-gather of `bytes` bytes from every rank (rank-major result).
using AllGatherFn = std::function<std::vector<uint8_t>(const void*, size_t)>;

/// Exchanges `mine` with the other ranks; throws grove::Error
/// (groveInvalidUsage) naming the first setting on which ranks differ.
void checkAgreement(const std::vector<AgreedSetting>& mine, int nranks,
                    const AllGatherFn& allGather);

}  // namespace grove::core
