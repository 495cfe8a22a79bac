// The link traits tests plan with, read from the transport registry's rows
// (transports/registry.h), so a test of the selector or the cost model sees
// the numbers a communicator over that transport would.
#pragma once

#include <string>

#include "base/error.h"
#include "base/link_traits.h"
#include "transports/registry.h"

namespace grove::presets {

/// The traits of the registered transport `name` ("shm", "socket", ...);
/// throws grove::Error(groveInvalidArgument) for a name not registered.
inline LinkTraits linkTraits(const std::string& name) {
  const transport::TransportEntry* e = transport::findTransport(name);
  if (e == nullptr) throwInvalidArgument("no transport '" + name + "' is registered");
  return e->traits;
}

/// The traits of device rings (the first row providing them: cuda_p2p in a
/// CUDA build, else host_staged; their traits are the same).
inline LinkTraits deviceRingTraits() {
  const transport::TransportEntry* e = transport::firstProviding(transport::kDeviceRings);
  if (e == nullptr) throwInvalidArgument("no transport provides device rings");
  return e->traits;
}

}  // namespace grove::presets
