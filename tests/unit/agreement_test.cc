// The settings exchange of communicator creation (core/agreement.h), with
// the all-gather played by the test: each "rank" contributes its own list.
#include <gtest/gtest.h>

#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "core/agreement.h"

namespace grove::core {
namespace {

// The record one rank contributes: what it hands the all-gather when it is
// the only rank.
std::vector<uint8_t> recordOf(const std::vector<AgreedSetting>& settings) {
  std::vector<uint8_t> record;
  checkAgreement(settings, 1, [&](const void* d, size_t n) {
    record.assign(static_cast<const uint8_t*>(d), static_cast<const uint8_t*>(d) + n);
    return record;
  });
  return record;
}

// Runs checkAgreement for rank 0 with `ranks` as every rank's settings;
// returns the error text ("" when they agree).
std::string check(const std::vector<std::vector<AgreedSetting>>& ranks) {
  AllGatherFn gather = [&](const void*, size_t) {
    std::vector<uint8_t> all;
    for (const auto& settings : ranks) {
      std::vector<uint8_t> record = recordOf(settings);
      all.insert(all.end(), record.begin(), record.end());
    }
    return all;
  };
  try {
    checkAgreement(ranks[0], static_cast<int>(ranks.size()), gather);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidUsage);
    return e.what();
  }
  return "";
}

TEST(Agreement, EqualSettingsPass) {
  CommOptions o;
  auto s = agreedSettings(o);
  EXPECT_EQ(check({s, s, s}), "");
}

TEST(Agreement, EveryRankNamesTheSettingAndBothValues) {
  CommOptions a, b;
  b.bufferBytes = 65536;
  std::string why = check({agreedSettings(a), agreedSettings(a), agreedSettings(b)});
  EXPECT_NE(why.find("ranks disagree on GROVE_BUFFSIZE: rank 0 has 1048576, rank 2 has 65536"),
            std::string::npos)
      << why;
  for (auto set :
       {+[](CommOptions& o) { o.chunkBytes = 4096; }, +[](CommOptions& o) { o.nChannels = 4; },
        +[](CommOptions& o) { o.algo = "allreduce:tree"; },
        +[](CommOptions& o) { o.transport = "socket"; }}) {
    CommOptions c;
    set(c);
    EXPECT_NE(check({agreedSettings(a), agreedSettings(c)}).find("ranks disagree on GROVE_"),
              std::string::npos);
  }
}

TEST(Agreement, RegistryThresholdsAndLongValues) {
  CommOptions o;
  auto mine = agreedSettings(o);
  config::setOverride("GROVE_DIRECT_MAX_BYTES", "4K");
  auto other = agreedSettings(o);
  config::setOverride("GROVE_DIRECT_MAX_BYTES", std::nullopt);
  EXPECT_NE(check({mine, other}).find("GROVE_DIRECT_MAX_BYTES"), std::string::npos);
  // Values too long for the record travel as a hash: still caught.
  CommOptions x, y;
  x.algo = std::string(300, 'a');
  y.algo = std::string(299, 'a') + "b";
  EXPECT_NE(check({agreedSettings(x), agreedSettings(y)}).find("GROVE_ALGO"), std::string::npos);
  EXPECT_EQ(check({agreedSettings(x), agreedSettings(x)}), "");
}

TEST(Agreement, DifferentVersionsOrSettingListsAreNamed) {
  CommOptions o;
  auto mine = agreedSettings(o);
  auto other = mine;
  other[0].value = "999999";
  EXPECT_NE(check({mine, other}).find("different grove versions"), std::string::npos);
  other = mine;
  other.pop_back();
  EXPECT_NE(check({mine, other}).find("different grove versions"), std::string::npos);
}

}  // namespace
}  // namespace grove::core
