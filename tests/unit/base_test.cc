#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/config.h"
#include "base/dtype.h"
#include "base/error.h"
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
      case config::Type::kString: break;
    }
  }
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
  EXPECT_THROW({ for (;;) w.wait(); }, Error);

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

}  // namespace grove
