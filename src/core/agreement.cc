#include "core/agreement.h"

#include <cstdio>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "core/unique_id.h"
#include "transports/registry.h"

namespace grove::core {
namespace {

// Bytes each rank contributes: the settings as "name=value\n" lines. A value
// too long to fit is replaced by its FNV-1a hash, which still tells "differs".
constexpr size_t kRecordBytes = 1024;
constexpr size_t kMaxValue = 120;

std::string fnvText(const std::string& s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "hash:%016llx",
                static_cast<unsigned long long>(hashBytes(s.data(), s.size())));
  return buf;
}

std::string encode(const std::vector<AgreedSetting>& settings) {
  std::string text;
  for (const AgreedSetting& s : settings)
    text += s.name + "=" + (s.value.size() > kMaxValue ? fnvText(s.value) : s.value) + "\n";
  if (text.size() >= kRecordBytes) throwInternalError("agreed settings do not fit their record");
  return text;
}

// name -> value lines of one rank's record, in order.
std::vector<AgreedSetting> decode(const uint8_t* record) {
  const char* chars = reinterpret_cast<const char*>(record);
  std::string text(chars, strnlen(chars, kRecordBytes));
  std::vector<AgreedSetting> out;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    size_t eq = line.find('=');
    out.push_back({line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1)});
    pos = nl + 1;
  }
  return out;
}

std::string shown(const std::string& v) { return v.empty() ? "(empty)" : v; }

}  // namespace

std::vector<AgreedSetting> agreedSettings(const CommOptions& o) {
  std::vector<AgreedSetting> s = {
      {"version", std::to_string(GROVE_VERSION_CODE)},
      {"GROVE_BUFFSIZE", std::to_string(o.bufferBytes)},
      {"GROVE_CHUNKSIZE", std::to_string(o.chunkBytes)},
      {"GROVE_TREE_JUDGE_BYTES",
       std::to_string(o.treeJudgeBytes)},  // every rank must keep the same trees
      {"GROVE_NCHANNELS", std::to_string(o.nChannels)},
      {"GROVE_TRANSPORT", o.transport},
      // A byte row's address slot is its place in the registry: rows a
      // program registered on some ranks only would misread every address.
      {"transports", transport::transportNames(transport::kByteStreams)},
      {"GROVE_ALGO", o.algo},
      {"GROVE_DEVICE_KIND", o.deviceKind == groveDeviceCuda ? "cuda" : "host"},
      {"GROVE_DEVICE_EMULATION", o.emulateDevice ? "1" : "0"},
      {"GROVE_P2P_DISABLE", o.disableP2P ? "1" : "0"},
      {"GROVE_DEVICE_ENGINE", o.deviceEngine},
  };
  // The selector's thresholds come from the registry (algorithms/select/selector.cc).
  for (const char* name : {"GROVE_DIRECT_MAX_BYTES", "GROVE_EAGER_MAX_BYTES"})
    s.push_back({name, std::to_string(config::getSize(name))});
  s.push_back({"GROVE_EAGER", config::getBool("GROVE_EAGER") ? "1" : "0"});
  s.push_back({"GROVE_TOPO_RANKS", config::getString("GROVE_TOPO_RANKS")});
  s.push_back({"GROVE_CHECK", o.checkCalls ? "calls" : o.tagCalls ? "tags" : "none"});
  return s;
}

void checkAgreement(const std::vector<AgreedSetting>& mine, int nranks,
                    const AllGatherFn& allGather) {
  std::string text = encode(mine);
  std::vector<uint8_t> record(kRecordBytes, 0);
  std::memcpy(record.data(), text.data(), text.size());
  std::vector<uint8_t> all = allGather(record.data(), record.size());
  if (all.size() != kRecordBytes * static_cast<size_t>(nranks))
    throwInternalError("the settings exchange returned " + std::to_string(all.size()) + " bytes");
  const std::vector<AgreedSetting> first = decode(all.data());
  for (int r = 1; r < nranks; ++r) {
    const std::vector<AgreedSetting> other = decode(all.data() + kRecordBytes * r);
    for (size_t i = 0; i < first.size() || i < other.size(); ++i) {
      const AgreedSetting* a = i < first.size() ? &first[i] : nullptr;
      const AgreedSetting* b = i < other.size() ? &other[i] : nullptr;
      if (a && b && a->name == b->name && a->value == b->value) continue;
      std::string name = a ? a->name : b->name;
      if (name == "version" || !a || !b || a->name != b->name) {
        std::string sa = a ? a->name + "=" + a->value : "-",
                    sb = b ? b->name + "=" + b->value : "-";
        throwInvalidUsage("ranks run different grove versions or builds (rank 0: " + sa +
                          ", rank " + std::to_string(r) + ": " + sb + ")");
      }
      throwInvalidUsage("ranks disagree on " + name + ": rank 0 has " + shown(a->value) +
                        ", rank " + std::to_string(r) + " has " + shown(b->value) +
                        " (every rank of a communicator must use the same value)");
    }
  }
}

}  // namespace grove::core
