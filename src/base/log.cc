#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/config.h"
#include "base/error.h"

namespace grove::log {
namespace {

struct State {
  std::atomic<int> level{-1};
  std::atomic<unsigned> subsys{kAll};
  std::atomic<int> rank{-1};
  std::mutex mu;
  FILE* out = nullptr;
};

State& state() {
  static State s;
  return s;
}

unsigned parseSubsys(const std::string& spec) {
  struct Name {
    const char* name;
    unsigned bit;
  };
  static const Name names[] = {{"INIT", kInit}, {"TOPO", kTopo}, {"PLAN", kPlan},
                               {"SHM", kShm},   {"NET", kNet},   {"P2P", kP2p},
                               {"COLL", kColl}, {"BOOT", kBoot}, {"ALL", kAll}};
  bool exclude = !spec.empty() && spec[0] == '^';
  unsigned mask = 0;
  size_t pos = exclude ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string tok =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const Name& n : names)
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (spec.empty()) return kAll;
  return exclude ? ~mask : mask;
}

std::string expandPath(std::string path) {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  for (size_t i; (i = path.find("%h")) != std::string::npos;) path.replace(i, 2, host);
  for (size_t i; (i = path.find("%p")) != std::string::npos;)
    path.replace(i, 2, std::to_string(getpid()));
  return path;
}

void load(State& s) {
  // A bad GROVE_DEBUG logs at WARN, and says so once; communicator creation
  // refuses it (config::validateAll).
  std::string lvl;
  std::string badLevel;
  try {
    lvl = config::getChoice("GROVE_DEBUG");
  } catch (const Error& e) {
    badLevel = e.what();
  }
  int l = static_cast<int>(Level::kWarn);
  if (lvl == "NONE")
    l = 0;
  else if (lvl == "INFO")
    l = 2;
  else if (lvl == "TRACE")
    l = 3;
  s.subsys.store(parseSubsys(config::getString("GROVE_DEBUG_SUBSYS")));
  std::string file = config::getString("GROVE_DEBUG_FILE");
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.out != nullptr && s.out != stderr) fclose(s.out);
  s.out = stderr;
  if (!file.empty()) {
    FILE* f = fopen(expandPath(file).c_str(), "a");
    if (f != nullptr)
      s.out = f;
    else
      std::fprintf(stderr,
                   "grove WARN GROVE_DEBUG_FILE=%s cannot be opened (%s); logging to stderr\n",
                   file.c_str(), std::strerror(errno));
  }
  s.level.store(l);
  if (!badLevel.empty()) std::fprintf(s.out, "grove WARN %s; logging at WARN\n", badLevel.c_str());
}

}  // namespace

Level level() {
  State& s = state();
  int l = s.level.load(std::memory_order_relaxed);
  if (l < 0) {
    load(s);
    l = s.level.load();
  }
  return static_cast<Level>(l);
}

bool enabled(Level lvl, unsigned subsys) {
  return static_cast<int>(lvl) <= static_cast<int>(level()) &&
         (state().subsys.load(std::memory_order_relaxed) & subsys) != 0;
}

void print(Level lvl, unsigned subsys, const char* fmt, ...) {
  if (!enabled(lvl, subsys)) return;
  static const char* lvlNames[] = {"NONE", "WARN", "INFO", "TRACE"};
  static const char* subNames[] = {"INIT", "TOPO", "PLAN", "SHM", "NET", "P2P", "COLL", "BOOT"};
  const char* sub = "ALL";
  for (int i = 0; i < 8; ++i)
    if (subsys == (1u << i)) sub = subNames[i];
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char host[64] = "host";
  gethostname(host, sizeof(host) - 1);
  State& s = state();
  int rank = s.rank.load(std::memory_order_relaxed);
  char rankText[16] = "-";
  if (rank >= 0) snprintf(rankText, sizeof(rankText), "%d", rank);
  std::lock_guard<std::mutex> lock(s.mu);
  FILE* out = s.out != nullptr ? s.out : stderr;
  fprintf(out, "%s:%d:%ld [%s] grove %s %s %s\n", host, static_cast<int>(getpid()),
          static_cast<long>(syscall(SYS_gettid)), rankText, lvlNames[static_cast<int>(lvl)], sub,
          msg);
  fflush(out);
}

void setRank(int rank) { state().rank.store(rank); }

void reload() { load(state()); }

}  // namespace grove::log
