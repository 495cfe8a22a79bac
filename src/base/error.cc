#include "base/error.h"

#include <cstring>

namespace grove {

void throwInvalidArgument(const std::string& msg) { throw Error(groveInvalidArgument, msg); }
void throwInvalidUsage(const std::string& msg) { throw Error(groveInvalidUsage, msg); }
void throwSystemError(const std::string& what, int errnum) {
  throw Error(groveSystemError, what + ": " + std::strerror(errnum));
}
void throwRemoteError(const std::string& msg) { throw Error(groveRemoteError, msg); }
void throwInternalError(const std::string& msg) { throw Error(groveInternalError, msg); }

}  // namespace grove
