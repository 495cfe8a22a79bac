// grove::Error: the one exception type of the C++ core. It carries a result
// code (the values of groveResult_t) and a message; the C layer catches it at
// the boundary and turns it into a return code plus groveGetLastError text.
#pragma once

#include <stdexcept>
#include <string>

#include "grove/grove.h"

namespace grove {

/// Typed error: a groveResult_t code and a human-readable message.
class Error : public std::runtime_error {
 public:
  Error(groveResult_t code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  /// The result code the C API returns for this error.
  groveResult_t code() const noexcept { return code_; }

 private:
  groveResult_t code_;
};

/// Throws Error(groveInvalidArgument, msg).
[[noreturn]] void throwInvalidArgument(const std::string& msg);
/// Throws Error(groveInvalidUsage, msg).
[[noreturn]] void throwInvalidUsage(const std::string& msg);
/// Throws Error(groveSystemError, "<what>: <strerror(errnum)>").
[[noreturn]] void throwSystemError(const std::string& what, int errnum);
/// Throws Error(groveRemoteError, msg).
[[noreturn]] void throwRemoteError(const std::string& msg);
/// Throws Error(groveInternalError, msg).
[[noreturn]] void throwInternalError(const std::string& msg);

}  // namespace grove
