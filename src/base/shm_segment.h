// ShmSegment: RAII owner of one POSIX shared-memory file and its mapping.
//
// How it works: a segment is a file in a tmpfs directory (GROVE_SHM_DIR,
// /dev/shm by default: the directory shm_open() uses on Linux, so plain
// open() in it is the same thing, and the directory can be moved for tests
// or containers). create() makes the file with O_EXCL, replacing a stale file
// of the same name left by a crashed job, sizes it with ftruncate and backs
// it with posix_fallocate, so a full /dev/shm fails here with a clear error
// instead of a SIGBUS on first touch. tryOpen() opens an existing file.
// map() maps it shared; closeFd() drops the descriptor once the mapping
// exists (the mapping keeps the memory alive). The file's (device, inode) is
// remembered, so unlink() removes the name only while it still names this
// very file, never a newer segment that took the name over. Destruction
// unmaps and closes; it does not unlink (the owner decides when the name goes).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace grove {

/// One shared-memory file and (optionally) its mapping.
class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  /// Moves ownership of the file and the mapping.
  ShmSegment(ShmSegment&& o) noexcept;
  /// Releases what this holds, then takes `o`'s file and mapping.
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  /// Unmaps and closes (does not unlink).
  ~ShmSegment();

  /// Creates `path` exclusively with `bytes` bytes (zero-filled, memory
  /// reserved). A file already there is taken as stale: it is unlinked and
  /// the creation retried; *replacedStale (if given) tells whether that
  /// happened. Throws grove::Error(groveSystemError) on failure (ENOSPC with a
  /// hint about the size of /dev/shm).
  static ShmSegment create(const std::string& path, size_t bytes, bool* replacedStale = nullptr);
  /// Opens an existing file read-write; returns an invalid segment if `path`
  /// does not exist (yet). Throws on other errors (permission, ...).
  static ShmSegment tryOpen(const std::string& path);

  /// True while this holds a file (open descriptor or mapping).
  bool valid() const { return fd_ >= 0 || base_ != nullptr; }
  /// Size of the file now (fstat); needs the descriptor.
  size_t fileSize() const;
  /// True while the file still has a name (st_nlink > 0); needs the descriptor.
  bool linked() const;
  /// Maps the first `bytes` bytes shared read-write (replacing any earlier
  /// mapping); needs the descriptor. The page tables are filled now
  /// (MAP_POPULATE): the first calls over a fresh link would otherwise pay a
  /// page fault per page touched (a 4-rank 32 B all-gather's first 50 calls
  /// took 29 us each instead of 3).
  void map(size_t bytes);
  /// Closes the descriptor; the mapping stays.
  void closeFd();
  /// Removes the file's name if it still refers to this file. Returns true if
  /// it removed it; a name already gone (ENOENT) is not an error.
  bool unlink();

  /// Start of the mapping (nullptr before map()).
  uint8_t* base() const { return static_cast<uint8_t*>(base_); }
  /// Bytes mapped.
  size_t mappedBytes() const { return mapped_; }
  /// Path of the file.
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;
  void rememberIdentity();

  std::string path_;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t mapped_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool haveIdentity_ = false;
};

}  // namespace grove
