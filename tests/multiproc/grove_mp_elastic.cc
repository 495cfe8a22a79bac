// grove_mp_elastic: one rank of an elastic-communicator job (shrink after a
// death or a revoke, then grow back), started by mp_elastic_test.cc with
// GROVE_COMM_ID, GROVE_RANK and GROVE_NRANKS set. Public C API only.
//
// A member of the first communicator runs all-reduces until one fails (the
// test SIGKILLs the ranks of --dead, or rank --revoke revokes the
// communicator from a second thread while its own all-reduce runs), then
// shrinks with GROVE_SHRINK_ABORT excluding --dead, checks all-reduces on
// the shrunk communicator and, with --grow, grows it back to GROVE_NRANKS
// with the ranks the test starts with --join R (the shrunk rank 0 writes the
// grow id to <dir>/growid). Each rank touches <dir>/ready.<rank> after its
// first all-reduce and prints, on steady-clock seconds:
//   FAILED <t> <error text>     its first failed call
//   SHRUNK <t> <ranks>          the shrunk communicator's all-reduces were exact
//   GROWN <t> <ranks>           the grown one's were exact
// Exit status: 0 when all of it went as expected; 1 otherwise (the reason
// printed); 3 when no failure came within 60 s.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grove/grove.h"

namespace {

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int rankOf = -1;

[[noreturn]] void fail(const std::string& what, groveComm_t comm = nullptr) {
  fprintf(stderr, "grove_mp_elastic[rank %d]: %s: %s\n", rankOf, what.c_str(),
          groveGetLastError(comm));
  fflush(stderr);
  _exit(1);
}

void touch(const std::string& path) { std::ofstream(path) << "1\n"; }

// All-reduce of `count` floats: rank r gives r + 1 + i % 7, so every element
// of the sum is exact. Returns the call's result; *exact says if it matched.
groveResult_t checkedAllReduce(groveComm_t comm, size_t count, bool* exact) {
  int rank = 0, n = 0;
  groveCommUserRank(comm, &rank);
  groveCommCount(comm, &n);
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
  groveResult_t r =
      groveAllReduce(in.data(), out.data(), count, groveFloat32, groveSum, comm, nullptr);
  *exact = true;
  if (r != groveSuccess) return r;
  for (size_t i = 0; i < count; ++i)
    if (out[i] != static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7))) {
      *exact = false;
      break;
    }
  return groveSuccess;
}

// Every size the test checks a reformed communicator with (eager, ring, large).
void checkComm(groveComm_t comm, const char* label) {
  for (size_t count : {size_t{16}, size_t{1} << 14, size_t{1} << 20}) {
    bool exact = false;
    if (groveResult_t r = checkedAllReduce(comm, count, &exact); r != groveSuccess)
      fail(std::string(label) + ": all-reduce of " + std::to_string(count) + " floats failed (" +
               groveGetErrorString(r) + ")",
           comm);
    if (!exact)
      fail(std::string(label) + ": all-reduce of " + std::to_string(count) + " floats is wrong");
  }
}

std::string toHex(const groveUniqueId& id) {
  std::string s;
  char b[3];
  for (unsigned char c : id.internal) {
    snprintf(b, sizeof b, "%02x", c);
    s += b;
  }
  return s;
}

bool fromHex(const std::string& s, groveUniqueId* id) {
  if (s.size() < 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i)
    id->internal[i] = static_cast<char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return true;
}

std::vector<int> parseList(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(std::atoi(item.c_str()));
  return v;
}

// A new rank: waits for the grow id, joins, checks.
int join(const std::string& dir, int n, int rank) {
  const double until = nowSec() + 60;
  groveUniqueId id;
  for (;;) {
    std::ifstream f(dir + "/growid");
    std::string hex;
    if (f >> hex && fromHex(hex, &id)) break;
    if (nowSec() > until) fail("no grow id came");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  groveComm_t grown = nullptr;
  if (groveCommGrow(nullptr, n, &id, rank, &grown, nullptr) != groveSuccess)
    fail("groveCommGrow (new rank)", grown);
  checkComm(grown, "grown communicator");
  printf("GROWN %.6f %d\n", nowSec(), n);
  fflush(stdout);
  groveCommDestroy(grown);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::vector<int> dead;
  bool grow = false;
  int revoker = -1, joinRank = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value after " + a);
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--dead")
      dead = parseList(next());
    else if (a == "--grow")
      grow = true;
    else if (a == "--revoke")
      revoker = std::atoi(next().c_str());
    else if (a == "--join")
      joinRank = std::atoi(next().c_str());
    else
      fail("unknown argument " + a);
  }
  const char* nEnv = getenv("GROVE_NRANKS");
  const char* rEnv = getenv("GROVE_RANK");
  if (dir.empty() || nEnv == nullptr) fail("usage: --dir D with GROVE_NRANKS (and GROVE_RANK) set");
  const int n = std::atoi(nEnv);
  if (joinRank >= 0) {
    rankOf = joinRank;
    return join(dir, n, joinRank);
  }
  rankOf = rEnv != nullptr ? std::atoi(rEnv) : 0;
  groveUniqueId id;
  if (groveGetUniqueId(&id) != groveSuccess) fail("groveGetUniqueId");
  groveComm_t comm = nullptr;
  if (groveCommInitRank(&comm, n, id, rankOf) != groveSuccess) fail("groveCommInitRank", comm);

  // Run until a call fails; a revoker revokes from a second thread while
  // its own all-reduces run.
  std::thread revoking;
  double failedAt = 0;
  std::string failure;
  const double until = nowSec() + 60;
  for (int iter = 0;; ++iter) {
    bool exact = false;
    groveResult_t r = checkedAllReduce(comm, size_t{1} << 16, &exact);
    if (r != groveSuccess) {
      failedAt = nowSec();
      failure = groveGetLastError(comm);
      break;
    }
    if (!exact) fail("all-reduce before the failure is wrong");
    if (iter == 0) {
      touch(dir + "/ready." + std::to_string(rankOf));
      if (rankOf == revoker)
        revoking = std::thread([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          if (groveCommRevoke(comm, GROVE_REVOKE_DEFAULT) != groveSuccess)
            fail("groveCommRevoke", comm);
        });
    }
    if (nowSec() > until) {
      fprintf(stderr, "no failure within 60 s\n");
      return 3;
    }
  }
  if (revoking.joinable()) revoking.join();
  printf("FAILED %.6f %s\n", failedAt, failure.c_str());
  fflush(stdout);

  groveComm_t shrunk = nullptr;
  if (groveCommShrink(comm, dead.data(), static_cast<int>(dead.size()), &shrunk, nullptr,
                      GROVE_SHRINK_ABORT) != groveSuccess)
    fail("groveCommShrink", comm);
  int m = 0;
  groveCommCount(shrunk, &m);
  if (m != n - static_cast<int>(dead.size()))
    fail("the shrunk communicator has " + std::to_string(m) + " ranks");
  checkComm(shrunk, "shrunk communicator");
  printf("SHRUNK %.6f %d\n", nowSec(), m);
  fflush(stdout);
  // The old communicator only fails calls now.
  bool exact = false;
  if (checkedAllReduce(comm, 16, &exact) == groveSuccess)
    fail("the old communicator still runs calls after an abort-mode shrink");
  if (groveCommDestroy(comm) != groveSuccess) fail("groveCommDestroy (old)");

  if (grow) {
    int shrunkRank = 0;
    groveCommUserRank(shrunk, &shrunkRank);
    groveUniqueId growId;
    if (shrunkRank == 0) {
      if (groveCommGetUniqueId(shrunk, &growId) != groveSuccess)
        fail("groveCommGetUniqueId", shrunk);
      {
        std::ofstream f(dir + "/growid.tmp");
        f << toHex(growId) << "\n";
      }
      if (rename((dir + "/growid.tmp").c_str(), (dir + "/growid").c_str()) != 0)
        fail("cannot publish the grow id");
    }
    groveComm_t grown = nullptr;
    if (groveCommGrow(shrunk, n, shrunkRank == 0 ? &growId : nullptr, -1, &grown, nullptr) !=
        groveSuccess)
      fail("groveCommGrow", shrunk);
    checkComm(grown, "grown communicator");
    printf("GROWN %.6f %d\n", nowSec(), n);
    fflush(stdout);
    groveCommDestroy(grown);
  }
  if (groveCommDestroy(shrunk) != groveSuccess) fail("groveCommDestroy (shrunk)");
  return 0;
}
