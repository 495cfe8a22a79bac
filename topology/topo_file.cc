#include "topology/topo_file.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace grove::topo {

std::string readTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throwSystemError("cannot read topology file '" + path + "'", errno ? errno : ENOENT);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throwSystemError("cannot write topology file '" + path + "'", errno ? errno : EACCES);
  out << text;
  out.flush();
  if (!out) throwSystemError("cannot write topology file '" + path + "'", errno ? errno : EIO);
}

bool looksLikeXml(const std::string& path, const std::string& text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos) return text[first] == '<';
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
}

Graph loadTopologyFile(const std::string& path) {
  std::string text = readTextFile(path);
  if (looksLikeXml(path, text)) {
    std::string stem = path.substr(path.find_last_of('/') + 1);
    stem = stem.substr(0, stem.find('.'));
    return fromNcclXml(text, path, stem.empty() ? "host0" : stem);
  }
  return fromJson(text, path);
}

}  // namespace grove::topo
