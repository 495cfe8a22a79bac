#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "base/config.h"
#include "base/dtype.h"
#include "base/entropy.h"
#include "base/error.h"
#include "base/siphash.h"
#include "base/wait.h"

namespace grove {

TEST(Config, DefaultsOverridesAndParsing) {
  EXPECT_EQ(config::getString("GROVE_TRANSPORT"), "auto");
  config::setOverride("GROVE_TIMEOUT", "2.5");
  EXPECT_DOUBLE_EQ(config::getDouble("GROVE_TIMEOUT"), 2.5);
  config::setOverride("GROVE_TIMEOUT", std::nullopt);
  config::setOverride("GROVE_BUFFSIZE", "4M");
  EXPECT_EQ(config::getSize("GROVE_BUFFSIZE"), 4u << 20);
  config::setOverride("GROVE_BUFFSIZE", "4X");
  EXPECT_THROW(config::getSize("GROVE_BUFFSIZE"), Error);
  config::setOverride("GROVE_BUFFSIZE", std::nullopt);
  EXPECT_THROW(config::find("GROVE_NO_SUCH_THING"), Error);
  EXPECT_EQ(config::parseSize("512K"), 512u << 10);
}

TEST(Config, EveryVariableHasHelpAndAParsableDefault) {
  for (const auto& v : config::all()) {
    EXPECT_NE(std::string(v.help), "") << v.name;
    EXPECT_EQ(std::string(v.name).rfind("GROVE_", 0), 0u) << v.name;
    if (config::rawValue(v.name)) continue;  // set in the environment: skip the default check
    switch (v.type) {
      case config::Type::kInt: EXPECT_NO_THROW(config::getInt(v.name)) << v.name; break;
      case config::Type::kBool: EXPECT_NO_THROW(config::getBool(v.name)) << v.name; break;
      case config::Type::kSize: EXPECT_NO_THROW(config::getSize(v.name)) << v.name; break;
      case config::Type::kDouble: EXPECT_NO_THROW(config::getDouble(v.name)) << v.name; break;
      case config::Type::kString:
        if (v.choices != nullptr) {
          EXPECT_NO_THROW(config::getChoice(v.name)) << v.name;
        }
        break;
    }
  }
}

// Sets one variable for the scope of a test.
struct ScopedVar {
  ScopedVar(const char* name, const char* value) : name_(name) { config::setOverride(name, value); }
  ~ScopedVar() { config::setOverride(name_, std::nullopt); }
  const char* name_;
};

// The error text of `fn`, or "" when it does not throw.
template <typename Fn>
std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidArgument);
    return e.what();
  }
  return "";
}

// Values that used to switch hang detection off, wrap around or mean
// "the default" are refused, each with the variable, the value and what is
// allowed; validateAll() (run by communicator creation) finds them all.
TEST(Config, OutOfRangeAndGarbageValuesAreRefused) {
  const std::pair<const char*, const char*> bad[] = {{"GROVE_TIMEOUT", "nan"},
                                                     {"GROVE_TIMEOUT", "0"},
                                                     {"GROVE_TIMEOUT", "-1"},
                                                     {"GROVE_TIMEOUT", "inf"},
                                                     {"GROVE_TIMEOUT", "1e300"},
                                                     {"GROVE_NCHANNELS", "4294967298"},
                                                     {"GROVE_NCHANNELS", "33"},
                                                     {"GROVE_NCHANNELS", "-1"},
                                                     {"GROVE_NCHANNELS", "99999999999999999999999"},
                                                     {"GROVE_DEBUG", "garbage"},
                                                     {"GROVE_DEVICE_KIND", "tpu"},
                                                     {"GROVE_BUFFSIZE", "1K"},
                                                     {"GROVE_BUFFSIZE", "nanK"},
                                                     {"GROVE_BUFFSIZE", "1e30G"},
                                                     {"GROVE_SPIN_US", "-5"},
                                                     {"GROVE_EAGER", "maybe"},
                                                     {"GROVE_DEVICE_KIND", "tpu"},
                                                     {"GROVE_SOCKET_FAMILY", "AF_UNIX"},
                                                     {"GROVE_TIMEOUT", "0x10"},
                                                     {"GROVE_NCHANNELS", "0x4"},
                                                     {"GROVE_NCHANNELS", " 4"},
                                                     {"GROVE_SPIN_US", "1e2"},
                                                     {"GROVE_BUFFSIZE", "0x100000"}};
  for (const auto& [name, value] : bad) {
    ScopedVar set(name, value);
    std::string why = errorOf([] { config::validateAll(); });
    EXPECT_NE(why.find(std::string(name) + "=" + value), std::string::npos)
        << name << "=" << value << ": " << why;
    EXPECT_NE(why.find("must be"), std::string::npos) << why;
  }
  ScopedVar timeout("GROVE_TIMEOUT", "nan");
  EXPECT_NE(errorOf([] { config::getDouble("GROVE_TIMEOUT"); }).find("finite number in [0.001"),
            std::string::npos);
}

// A GROVE_* name nothing reads is a misspelling: it is reported with the
// closest registered name; the scripts' and tools' own names are not.
TEST(Config, UnknownNamesAreFoundWithTheClosestKnownName) {
  setenv("GROVE_TIMEOUTT", "5", 1);
  setenv("GROVE_BUFSIZE", "1", 1);
  setenv("GROVE_QQQQQQQQQQQQ", "1", 1);
  setenv("GROVE_TEST_JOBS", "2", 1);
  setenv("GROVE_GPU_CHECK_ANYTHING", "1", 1);
  std::map<std::string, std::string> found;
  for (const auto& u : config::unknownEnvironmentNames()) found[u.name] = u.closest;
  unsetenv("GROVE_TIMEOUTT");
  unsetenv("GROVE_BUFSIZE");
  unsetenv("GROVE_QQQQQQQQQQQQ");
  unsetenv("GROVE_TEST_JOBS");
  unsetenv("GROVE_GPU_CHECK_ANYTHING");
  EXPECT_EQ(found["GROVE_TIMEOUTT"], "GROVE_TIMEOUT");
  EXPECT_EQ(found["GROVE_BUFSIZE"], "GROVE_BUFFSIZE");
  ASSERT_EQ(found.count("GROVE_QQQQQQQQQQQQ"), 1u);
  EXPECT_EQ(found["GROVE_QQQQQQQQQQQQ"], "");
  EXPECT_EQ(found.count("GROVE_TEST_JOBS"), 0u);
  EXPECT_EQ(found.count("GROVE_GPU_CHECK_ANYTHING"), 0u);
  for (const auto& v : config::all()) EXPECT_EQ(found.count(v.name), 0u) << v.name;
}

TEST(Config, GoodValuesPassAndChoicesIgnoreCase) {
  {
    ScopedVar a("GROVE_DEBUG", "info"), b("GROVE_DEVICE_KIND", "CUDA"), c("GROVE_NCHANNELS", "32"),
        d("GROVE_TIMEOUT", "0.5"), e("GROVE_BUFFSIZE", "4K"), f("GROVE_SOCKET_FAMILY", "");
    EXPECT_NO_THROW(config::validateAll());
    EXPECT_EQ(config::getChoice("GROVE_DEBUG"), "INFO");
    EXPECT_EQ(config::getChoice("GROVE_DEVICE_KIND"), "cuda");
    EXPECT_EQ(config::getChoice("GROVE_SOCKET_FAMILY"), "");
    EXPECT_EQ(config::getInt("GROVE_NCHANNELS"), 32);
  }
  ScopedVar empty("GROVE_DEVICE_KIND", "");
  EXPECT_EQ(config::getChoice("GROVE_DEVICE_KIND"), "host");  // empty means the default
  EXPECT_EQ(config::allowedText(config::find("GROVE_NCHANNELS")), "an integer in [0, 32]");
}

// A component's own table (what a transport declares in its folder).
const config::VarTable kComponentSettings{
    {"GROVE_UNIT_COMPONENT_DEPTH", config::Type::kInt, "3", "a component's own setting (test)",
     nullptr, 1, 8},
};

TEST(Config, ComponentTablesJoinTheOneRegistry) {
  const config::Var& v = config::find("GROVE_UNIT_COMPONENT_DEPTH");
  EXPECT_STREQ(v.help, "a component's own setting (test)");
  EXPECT_EQ(config::getInt("GROVE_UNIT_COMPONENT_DEPTH"), 3);
  bool listed = false;
  for (const config::Var& var : config::all()) listed = listed || var.name == v.name;
  EXPECT_TRUE(listed);
  {
    ScopedVar deep("GROVE_UNIT_COMPONENT_DEPTH", "9");  // its limits hold like any other's
    EXPECT_THROW(config::getInt("GROVE_UNIT_COMPONENT_DEPTH"), Error);
  }
  // A name registered twice (here, one of the library's own) is refused.
  EXPECT_THROW(config::VarTable({{"GROVE_TIMEOUT", config::Type::kDouble, "1", "again"}}), Error);
}

TEST(Dtype, ElementsReadAndWrittenAsDoubles) {
  uint8_t buf[32] = {};
  for (groveDataType_t t : {groveInt8, groveUint8, groveInt32, groveUint32, groveInt64, groveUint64,
                            groveFloat16, groveFloat32, groveFloat64, groveBfloat16}) {
    std::memset(buf, 0, sizeof buf);
    storeElement(t, 100, buf, 1);
    EXPECT_EQ(elementAsDouble(t, buf, 1), 100.0) << dtypeName(t);
    EXPECT_EQ(elementAsDouble(t, buf, 0), 0.0) << dtypeName(t) << ": element 0 untouched";
  }
  storeElement(groveInt8, -3, buf, 0);
  EXPECT_EQ(elementAsDouble(groveInt8, buf, 0), -3.0);
  storeElement(groveUint8, 300, buf, 0);  // wraps to the type's width
  EXPECT_EQ(elementAsDouble(groveUint8, buf, 0), 44.0);
  storeElement(groveUint32, -1, buf, 0);  // two's complement
  EXPECT_EQ(elementAsDouble(groveUint32, buf, 0), 4294967295.0);
  storeElement(groveInt64, -4096.75, buf, 0);  // the integer part
  EXPECT_EQ(elementAsDouble(groveInt64, buf, 0), -4096.0);
  storeElement(groveFloat16, 2049.0, buf, 0);  // nearest even
  EXPECT_EQ(elementAsDouble(groveFloat16, buf, 0), 2048.0);
  storeElement(groveBfloat16, 0.1, buf, 0);
  EXPECT_NEAR(elementAsDouble(groveBfloat16, buf, 0), 0.1, 0.001);
  storeElement(groveFloat64, 0.1, buf, 0);
  EXPECT_EQ(elementAsDouble(groveFloat64, buf, 0), 0.1);
}

TEST(Dtype, SizesNamesAndNcclValues) {
  EXPECT_EQ(dtypeSize(groveFloat16), 2u);
  EXPECT_EQ(dtypeSize(groveBfloat16), 2u);
  EXPECT_EQ(dtypeSize(groveUint64), 8u);
  EXPECT_EQ(static_cast<int>(groveBfloat16), 9);
  EXPECT_EQ(static_cast<int>(groveAvg), 4);
  EXPECT_EQ(parseDtype("float"), groveFloat32);
  EXPECT_EQ(parseDtype("bf16"), groveBfloat16);
  EXPECT_FALSE(parseDtype("float128").has_value());
  EXPECT_EQ(parseOp("max"), groveMax);
  EXPECT_FALSE(dtypeValid(10));
  EXPECT_FALSE(opValid(-1));
}

TEST(Waiter, TimesOutWithoutProgressAndSeesAbort) {
  WaitContext ctx;
  ctx.timeoutSec = 0.05;
  Waiter w(ctx, "testing");
  EXPECT_THROW(
      {
        for (;;) w.wait();
      },
      Error);

  std::atomic<bool> flag{true};
  std::string reason = "rank 3 died";
  WaitContext actx;
  actx.abortFlag = &flag;
  actx.abortReason = &reason;
  Waiter aw(actx, "testing");
  try {
    for (;;) aw.wait();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 3 died"), std::string::npos);
  }
}

// A collective that failed on a remote error waits this way for the job's
// abort notice: it returns as soon as another thread raises the signal, with
// the first reason, and gives up after its bound when none comes.
TEST(AbortSignal, WaitRaisedSeesALateRaiseAndGivesUpWithoutOne) {
  AbortSignal quiet;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(quiet.waitRaised(0.05));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));

  AbortSignal late;
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    late.raise("rank 2 died");
    late.raise("rank 0 gave up");
  });
  EXPECT_TRUE(late.waitRaised(30.0));
  raiser.join();
  EXPECT_EQ(late.reason(), "rank 2 died");
}

// The reference vectors of SipHash-2-4 (key 00..0f, message 00..len-1).
TEST(SipHash, MatchesTheReferenceVectors) {
  SipKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  uint8_t msg[64];
  for (int i = 0; i < 64; ++i) msg[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(sipHash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(sipHash24(key, msg, 1), 0x74f839c593dc67fdull);
  EXPECT_EQ(sipHash24(key, msg, 8), 0x93f5f5799a932462ull);
  EXPECT_EQ(sipHash24(key, msg, 15), 0xa129ca6149be45e5ull);
  EXPECT_EQ(sipHash24(key, msg, 63), 0x958a324ceb064572ull);
  key.k1 ^= 1;  // another key, another tag
  EXPECT_NE(sipHash24(key, msg, 15), 0xa129ca6149be45e5ull);
}

// FNV-1a's published 64-bit vectors, and a hash continued across two calls.
TEST(Entropy, Fnv1aMatchesItsVectorsAndContinues) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64("bar", 3, fnv1a64("foo", 3)), fnv1a64("foobar", 6));
}

TEST(Entropy, RandomBitsDiffer) {
  uint8_t a[64] = {}, b[64] = {};
  ASSERT_TRUE(randomBytes(a, sizeof a));
  ASSERT_TRUE(randomBytes(b, sizeof b));
  EXPECT_NE(std::memcmp(a, b, sizeof a), 0);
  EXPECT_NE(randomU64(), randomU64());
}

}  // namespace grove
