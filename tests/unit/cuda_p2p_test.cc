// cuda_p2p's CPU side (CUDA builds): without a usable GPU it says so --
// canConnect is false and making or opening a ring throws a CUDA error that
// explains why. With a GPU, two ranks of this process on one device share
// a ring by its raw address and the owner's destruction is clean.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "base/error.h"
#include "transports/cuda_p2p/cuda_p2p_transport.h"

namespace grove::transport {
namespace {

DeviceContext contextFor(int rank, int nranks, int device) {
  DeviceContext c;
  c.rank = rank;
  c.nranks = nranks;
  c.jobId = "cuda-p2p-test-" + std::to_string(getpid());
  for (int r = 0; r < nranks; ++r) {
    DevicePeer p;
    p.rank = r;
    p.pid = static_cast<int32_t>(getpid());
    p.hostHash = 42;
    if (!fillCudaIdentity(p, device)) p.cudaDevice = device;  // no GPU: keep the index
    c.peers.push_back(p);
  }
  return c;
}

TEST(CudaP2P, WithoutAGpuReportsACleanError) {
  CudaP2PTransport t(contextFor(0, 2, 0));
  if (t.available()) GTEST_SKIP() << "a CUDA device is present; covered by SameProcessRing";
  EXPECT_STREQ(t.name(), "cuda_p2p");
  EXPECT_FALSE(t.canConnect(1));
  EXPECT_FALSE(t.unavailableReason().empty());
  RingExport e;
  try {
    t.createRecv({1, 0, 0}, 1024, e);
    ADD_FAILURE() << "made a device ring without a device";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), groveUnhandledCudaError);
    EXPECT_NE(std::string(err.what()).find("cuda_p2p"), std::string::npos) << err.what();
  }
  e.kind = RingKind::kCudaIpc;
  e.ownerRank = 1;
  e.capacity = 1024;
  EXPECT_THROW(t.openSend({1, 0, 0}, e), Error);
}

TEST(CudaP2P, NoDeviceIndexIsUnavailable) {
  CudaP2PTransport t(contextFor(0, 2, -1));
  EXPECT_FALSE(t.available());
  EXPECT_FALSE(t.canConnect(1));
}

TEST(CudaP2P, SameProcessRing) {
  CudaP2PTransport recv(contextFor(1, 2, 0));
  if (!recv.available()) GTEST_SKIP() << "no CUDA device: " << recv.unavailableReason();
  CudaP2PTransport send(contextFor(0, 2, 0));
  ASSERT_TRUE(recv.canConnect(0));
  ASSERT_TRUE(send.canConnect(1));
  RingExport e;
  DevRing r = recv.createRecv({0, 2, 0}, 4096, e);
  EXPECT_EQ(e.kind, RingKind::kCudaIpc);
  DevRing s = send.openSend({1, 2, 0}, e);
  EXPECT_EQ(s.data, r.data) << "one process: the raw device address";
  EXPECT_THROW(send.openSend({1, 3, 0}, e), Error) << "another channel's export";
}

}  // namespace
}  // namespace grove::transport
