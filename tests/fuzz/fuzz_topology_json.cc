// libFuzzer target: grove's topology JSON reader (topology/topo_file.h).
// Any input must either load (and then survive a JSON round trip and the
// path computations every planner starts from) or be refused with
// grove::Error; anything else -- a crash, another exception, a sanitizer
// report -- is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "topology/graph.h"
#include "topology/topo_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    grove::topo::Graph g = grove::topo::fromJson(text, "fuzz.json");
    grove::topo::Graph again = grove::topo::fromJson(grove::topo::toJson(g), "roundtrip.json");
    if (again.nodes().size() != g.nodes().size()) __builtin_trap();  // the round trip lost nodes
  } catch (const grove::Error&) {}
  try {
    grove::topo::Graph g = grove::topo::fromJson(
        "{\"machines\": [{\"name\": \"m\", \"nodes\": "
        "[{\"name\": \"cpu0\", \"kind\": \"cpu\"}]}]}",
        "base.json");
    grove::topo::applyJson(g, text, "fuzz-override.json");
  } catch (const grove::Error&) {}
  return 0;
}
