// Logging by level x subsystem (GROVE_DEBUG, GROVE_DEBUG_SUBSYS,
// GROVE_DEBUG_FILE). Lines look like
//   host:pid:tid [rank] grove INFO COLL allreduce 4096 B float sum algo=ring ...
// The level test is one relaxed load, so disabled logs cost nearly nothing.
#pragma once

#include <atomic>
#include <cstdarg>

namespace grove::log {

/// Severity; a message is printed when its level <= the configured level.
enum class Level : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

/// Subsystems (bit flags) for GROVE_DEBUG_SUBSYS.
enum Subsys : unsigned {
  kInit = 1u << 0,
  kTopo = 1u << 1,
  kPlan = 1u << 2,
  kShm = 1u << 3,
  kNet = 1u << 4,
  kP2p = 1u << 5,
  kColl = 1u << 6,
  kBoot = 1u << 7,
  kAll = ~0u
};

/// Configured level (reads the config the first time).
Level level();
/// True when a message of this level and subsystem would be printed.
bool enabled(Level lvl, unsigned subsys);
/// Prints one line (printf-style) if enabled.
void print(Level lvl, unsigned subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/// Sets the rank shown in log lines of this thread's process ("-" until set).
void setRank(int rank);
/// Re-reads GROVE_DEBUG* (tests that change the config call this).
void reload();

}  // namespace grove::log

#define GROVE_WARN(subsys, ...) \
  ::grove::log::print(::grove::log::Level::kWarn, (subsys), __VA_ARGS__)
#define GROVE_INFO(subsys, ...)                                               \
  do {                                                                        \
    if (::grove::log::enabled(::grove::log::Level::kInfo, (subsys)))          \
      ::grove::log::print(::grove::log::Level::kInfo, (subsys), __VA_ARGS__); \
  } while (0)
#define GROVE_TRACE(subsys, ...)                                               \
  do {                                                                         \
    if (::grove::log::enabled(::grove::log::Level::kTrace, (subsys)))          \
      ::grove::log::print(::grove::log::Level::kTrace, (subsys), __VA_ARGS__); \
  } while (0)
