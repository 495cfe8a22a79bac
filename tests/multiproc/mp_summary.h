// expectCheckRun: the verdict on a grove_mp_check job -- it finished, every
// rank exited 0, its SUMMARY line reports cases run and no failures, and no
// rank printed a failure.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "mp_spawn.h"

namespace mptest {

/// Checks a finished grove_mp_check run of `nranks` ranks; `what` names it in messages.
inline void expectCheckRun(const RunResult& r, int nranks, const std::string& what) {
  ASSERT_TRUE(r.finished) << "did not finish: " << what << "\n" << tail(r.output);
  EXPECT_TRUE(r.ok()) << describeStatus(r.status) << " from " << what << "\n" << tail(r.output);
  const std::string want = "SUMMARY nranks=" + std::to_string(nranks) + " ";
  const size_t at = r.output.find(want);
  ASSERT_NE(at, std::string::npos) << "no SUMMARY line: " << what << "\n" << tail(r.output);
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_NE(line.find("failures=0 "), std::string::npos) << line << "\n" << tail(r.output);
  EXPECT_EQ(line.find("cases=0 "), std::string::npos) << "no case ran: " << line;
  EXPECT_EQ(r.output.find("FAIL rank"), std::string::npos) << tail(r.output);
}

}  // namespace mptest
