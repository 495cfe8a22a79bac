// libFuzzer target: the NCCL topology XML importer (topology/topo_file.h).
// Any input must load or be refused with grove::Error; nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "topology/topo_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    grove::topo::Graph g = grove::topo::fromNcclXml(text, "fuzz.xml", "host");
    (void)grove::topo::toJson(g);
  } catch (const grove::Error&) {}
  return 0;
}
