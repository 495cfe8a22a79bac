// Encoding of groveUniqueId and makeUniqueId; see unique_id.h.
#include "core/unique_id.h"

#include <arpa/inet.h>
#include <errno.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "base/socket.h"
#include "core/bootstrap_root.h"

namespace grove::core {
namespace {

constexpr uint32_t kIdMagic = 0x47524944u;  // "GRID"
constexpr uint16_t kIdVersion = 1;
constexpr size_t kChecksumAt = 48;

template <typename T>
void put(uint8_t* base, size_t at, T v) {
  std::memcpy(base + at, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t* base, size_t at) {
  T v;
  std::memcpy(&v, base + at, sizeof(T));
  return v;
}

constexpr size_t kMinSecretChars = 16;

// The job's secret text for GROVE_COMM_ID: GROVE_COMM_SECRET, or the first
// line of GROVE_COMM_SECRET_FILE. There is no default: a secret derived from
// the address would let anyone who can reach the port join the job.
std::string commSecret(const std::string& commId) {
  std::string text = config::getString("GROVE_COMM_SECRET");
  const std::string file = config::getString("GROVE_COMM_SECRET_FILE");
  if (text.empty() && !file.empty()) {
    std::ifstream in(file);
    if (!in) throwInvalidArgument("GROVE_COMM_SECRET_FILE=" + file + " cannot be read");
    std::getline(in, text);
    while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) text.pop_back();
  }
  if (text.empty())
    throwInvalidUsage("GROVE_COMM_ID=" + commId +
                      " needs the job's secret: set "
                      "GROVE_COMM_SECRET (or GROVE_COMM_SECRET_FILE) to the same random text on "
                      "every rank, e.g. export GROVE_COMM_SECRET=$(od -An -N16 -tx1 /dev/urandom "
                      "| tr -d ' \\n'); grove-launch does this for you");
  if (text.size() < kMinSecretChars)
    throwInvalidArgument("the job's secret (GROVE_COMM_SECRET) has " + std::to_string(text.size()) +
                         " characters; use at least " + std::to_string(kMinSecretChars) +
                         " random ones");
  return text;
}

}  // namespace

void encodeUniqueId(const UniqueIdData& d, groveUniqueId* out) {
  static_assert(sizeof(groveUniqueId) == 128, "groveUniqueId must be 128 bytes");
  auto* b = reinterpret_cast<uint8_t*>(out->internal);
  std::memset(b, 0, sizeof(out->internal));
  put<uint32_t>(b, 0, kIdMagic);
  put<uint16_t>(b, 4, kIdVersion);
  put<uint16_t>(b, 6, d.fromEnv ? 1 : 0);
  if (d.root.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&d.root);
    put<uint16_t>(b, 8, 4);
    put<uint16_t>(b, 10, ntohs(s->sin_port));
    std::memcpy(b + 16, &s->sin_addr, 4);
  } else if (d.root.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&d.root);
    put<uint16_t>(b, 8, 6);
    put<uint16_t>(b, 10, ntohs(s->sin6_port));
    put<uint32_t>(b, 12, s->sin6_scope_id);
    std::memcpy(b + 16, &s->sin6_addr, 16);
  }
  put<uint64_t>(b, 32, d.secret);
  put<uint64_t>(b, 40, d.nonce);
  put<uint64_t>(b, kChecksumAt, hashBytes(b, kChecksumAt));
}

UniqueIdData decodeUniqueId(const groveUniqueId& id) {
  const auto* b = reinterpret_cast<const uint8_t*>(id.internal);
  if (get<uint32_t>(b, 0) != kIdMagic)
    throwInvalidArgument("not a grove unique id (bad magic); was it made by groveGetUniqueId?");
  uint16_t version = get<uint16_t>(b, 4);
  if (version != kIdVersion)
    throwInvalidArgument("unique id has format version " + std::to_string(version) +
                         ", this library reads version " + std::to_string(kIdVersion));
  if (get<uint64_t>(b, kChecksumAt) != hashBytes(b, kChecksumAt))
    throwInvalidArgument("unique id is corrupted (checksum mismatch)");
  UniqueIdData d;
  d.fromEnv = (get<uint16_t>(b, 6) & 1) != 0;
  uint16_t fam = get<uint16_t>(b, 8);
  if (fam == 4) {
    auto* s = reinterpret_cast<sockaddr_in*>(&d.root);
    s->sin_family = AF_INET;
    s->sin_port = htons(get<uint16_t>(b, 10));
    std::memcpy(&s->sin_addr, b + 16, 4);
  } else if (fam == 6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&d.root);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(get<uint16_t>(b, 10));
    s->sin6_scope_id = get<uint32_t>(b, 12);
    std::memcpy(&s->sin6_addr, b + 16, 16);
  } else {
    throwInvalidArgument("unique id names no valid root address");
  }
  d.secret = get<uint64_t>(b, 32);
  d.nonce = get<uint64_t>(b, 40);
  return d;
}

UniqueIdData makeUniqueId(bool ignoreEnv) {
  UniqueIdData d;
  std::string commId = ignoreEnv ? std::string() : config::getString("GROVE_COMM_ID");
  if (!commId.empty()) {
    d.root = net::resolveAddress(commId);
    d.fromEnv = true;
    const std::string secretText = commSecret(commId);
    std::string seed = "grove-secret=" + secretText;
    d.secret = hashBytes(seed.data(), seed.size());
    std::string nonceSeed = "grove-nonce:" + commId;
    d.nonce = hashBytes(&d.secret, sizeof(d.secret), hashBytes(nonceSeed.data(), nonceSeed.size()));
    GROVE_INFO(log::kBoot, "unique id from GROVE_COMM_ID=%s (root %s)", commId.c_str(),
               net::formatAddress(d.root).c_str());
    return d;
  }
  d.secret = randomU64();
  d.nonce = randomU64();
  net::Interface itf = net::pickInterface();
  sockaddr_storage addr = itf.addr;
  net::setAddressPort(addr, 0);
  // Once every rank has joined nobody needs to connect: the listener closes.
  auto root = RootServer::start(addr, d.secret, d.nonce, /*closeListenerWhenComplete=*/true);
  d.root = root->address();
  return d;
}

std::string jobIdOf(const UniqueIdData& d) {
  uint64_t h = hashBytes(&d.nonce, sizeof(d.nonce));
  h = hashBytes(&d.secret, sizeof(d.secret), h);
  char buf[17];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

uint64_t runLinkSecret(const UniqueIdData& d, const std::vector<uint8_t>& salts) {
  return sipHash24(SipKey{d.secret, d.nonce}, salts.data(), salts.size());
}

}  // namespace grove::core
