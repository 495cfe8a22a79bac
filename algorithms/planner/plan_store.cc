// PlanStore: plans by name in memory and in a directory (plan_store.h).
#include "algorithms/planner/plan_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/log.h"

namespace grove::plan {

namespace {

std::string pathOf(const std::string& dir, const std::string& name) {
  return dir + "/grove-plan-" + name;
}

std::optional<std::string> readSmallFile(const std::string& path, size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buf, static_cast<size_t>(got));
    if (text.size() > limit) {
      ::close(fd);
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

/// Writes `text` to a fresh temporary file beside `path`, then renames it
/// into place: a reader sees the old file or the whole new one.
bool writeAtomically(const std::string& path, const std::string& text) {
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t put = ::write(fd, text.data() + done, text.size() - done);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) break;
    done += static_cast<size_t>(put);
  }
  const bool ok = done == text.size() && ::close(fd) == 0;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (done != text.size()) ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

PlanStore& PlanStore::process() {
  static PlanStore* store = new PlanStore;  // never destroyed: used until exit
  return *store;
}

bool PlanStore::usable(const std::string& dir) {
  // mu_ is held.
  auto it = dirState_.find(dir);
  if (it != dirState_.end()) return it->second;
  struct stat st {};
  std::string why;
  if (::stat(dir.c_str(), &st) != 0) {
    // Missing: make it (another rank may make it at the same moment; then
    // it is there to check like any other).
    const bool made = errno == ENOENT && (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST);
    if (!made || ::stat(dir.c_str(), &st) != 0)
      why = std::string("cannot use it (") + std::strerror(errno) + ")";
  }
  if (why.empty() && !S_ISDIR(st.st_mode)) why = "it is not a directory";
  if (why.empty() && st.st_uid != ::geteuid()) why = "it belongs to another user";
  if (why.empty() && (st.st_mode & (S_IWGRP | S_IWOTH)))
    why = "others may write to it (chmod go-w)";
  if (!why.empty())
    GROVE_WARN(log::kPlan, "plan cache directory %s: %s; plans are kept in memory only",
               dir.c_str(), why.c_str());
  dirState_[dir] = why.empty();
  return why.empty();
}

std::optional<std::string> PlanStore::load(const std::string& name, const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = memory_.find(name); it != memory_.end()) {
    ++hits_;
    return it->second;
  }
  if (dir.empty() || !usable(dir)) return std::nullopt;
  std::optional<std::string> text = readSmallFile(pathOf(dir, name), kMaxFileBytes);
  if (text) ++hits_;
  return text;
}

void PlanStore::save(const std::string& name, const std::string& text, const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (memory_.emplace(name, text).second) order_.push_back(name);
  while (memory_.size() > kMaxInMemory) {
    memory_.erase(order_.front());
    order_.pop_front();
  }
  ++saves_;
  if (!dir.empty() && usable(dir) && !writeAtomically(pathOf(dir, name), text))
    GROVE_WARN(log::kPlan, "plan cache directory %s: cannot write %s (%s)", dir.c_str(),
               name.c_str(), std::strerror(errno));
}

void PlanStore::drop(const std::string& name, const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.erase(name);
  for (auto it = order_.begin(); it != order_.end(); ++it)
    if (*it == name) {
      order_.erase(it);
      break;
    }
  if (!dir.empty() && usable(dir)) ::unlink(pathOf(dir, name).c_str());
}

void PlanStore::clearMemory() {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.clear();
  order_.clear();
}

uint64_t PlanStore::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t PlanStore::saves() const {
  std::lock_guard<std::mutex> lock(mu_);
  return saves_;
}

}  // namespace grove::plan
