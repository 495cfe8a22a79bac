// JSON text helpers shared by every writer of JSON (topology files, grove-info).
#pragma once

#include <string>

namespace grove {

/// Appends `s` to `out` as a quoted JSON string (", \, control characters escaped).
void appendJsonString(std::string& out, const std::string& s);

/// `s` as a quoted JSON string.
inline std::string jsonQuoted(const std::string& s) {
  std::string out;
  appendJsonString(out, s);
  return out;
}

}  // namespace grove
