#include "base/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "base/log.h"

namespace grove {

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    base_ = std::exchange(o.base_, nullptr);
    mapped_ = std::exchange(o.mapped_, 0);
    dev_ = o.dev_;
    ino_ = o.ino_;
    haveIdentity_ = std::exchange(o.haveIdentity_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { release(); }

void ShmSegment::release() noexcept {
  if (base_ != nullptr) munmap(base_, mapped_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  mapped_ = 0;
  fd_ = -1;
}

void ShmSegment::rememberIdentity() {
  struct stat st {};
  if (fstat(fd_, &st) != 0) throwSystemError("fstat " + path_, errno);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  haveIdentity_ = true;
}

ShmSegment ShmSegment::create(const std::string& path, size_t bytes, bool* replacedStale) {
  if (replacedStale != nullptr) *replacedStale = false;
  ShmSegment seg;
  seg.path_ = path;
  for (int attempt = 0;; ++attempt) {
    seg.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (seg.fd_ >= 0) break;
    int err = errno;
    if (err != EEXIST || attempt >= 3) throwSystemError("cannot create shm segment " + path, err);
    // A file of this name outlived the job that made it: take it away.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throwSystemError("cannot remove stale shm segment " + path, errno);
    if (replacedStale != nullptr) *replacedStale = true;
  }
  seg.rememberIdentity();
  if (ftruncate(seg.fd_, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    seg.unlink();
    throwSystemError("cannot size shm segment " + path + " to " + std::to_string(bytes) + " bytes",
                     err);
  }
  int err = posix_fallocate(seg.fd_, 0, static_cast<off_t>(bytes));
  if (err == ENOSPC || err == ENOMEM) {
    seg.unlink();
    throw Error(groveSystemError, "not enough shared memory for " + path + " (" +
                                      std::to_string(bytes) + " bytes): " + std::strerror(err) +
                                      "; enlarge /dev/shm (docker: --shm-size), lower "
                                      "GROVE_BUFFSIZE, or set GROVE_SHM_DIR");
  }
  // Other errors (EOPNOTSUPP on odd file systems, EINVAL) only lose the early check.
  return seg;
}

ShmSegment ShmSegment::tryOpen(const std::string& path) {
  ShmSegment seg;
  seg.fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (seg.fd_ < 0) {
    if (errno == ENOENT) return ShmSegment();
    throwSystemError("cannot open shm segment " + path, errno);
  }
  seg.path_ = path;
  seg.rememberIdentity();
  return seg;
}

size_t ShmSegment::fileSize() const {
  struct stat st {};
  if (fstat(fd_, &st) != 0) throwSystemError("fstat " + path_, errno);
  return static_cast<size_t>(st.st_size);
}

bool ShmSegment::linked() const {
  struct stat st {};
  if (fstat(fd_, &st) != 0) throwSystemError("fstat " + path_, errno);
  return st.st_nlink > 0;
}

void ShmSegment::map(size_t bytes) {
  if (base_ != nullptr) {
    munmap(base_, mapped_);
    base_ = nullptr;
    mapped_ = 0;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
  if (p == MAP_FAILED) throwSystemError("cannot map shm segment " + path_, errno);
  base_ = p;
  mapped_ = bytes;
}

void ShmSegment::closeFd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool ShmSegment::unlink() {
  if (path_.empty() || !haveIdentity_) return false;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return false;         // already gone
  if (st.st_dev != dev_ || st.st_ino != ino_) return false;  // the name is someone else's now
  if (::unlink(path_.c_str()) == 0) return true;
  if (errno != ENOENT)
    GROVE_WARN(log::kShm, "cannot unlink %s: %s", path_.c_str(), strerror(errno));
  return false;
}

}  // namespace grove
