// N executor ranks on one GPU against the host executor (see gpu_exec_harness.h).
#include "gpu_exec_harness.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/dtype.h"
#include "exec/host_executor.h"
#include "gpu_check.h"
#include "ir/validate.h"
#include "unit/harness/thread_ranks.h"

namespace grove::gputest {

namespace xc = exec::cuda;
namespace dv = exec::dev;
using plan::Coll;

std::string caseText(const ExecCase& c) {
  const char* mode = c.mode == xc::LaunchMode::kPhased       ? " phased"
                     : c.mode == xc::LaunchMode::kPersistent ? " persistent"
                                                             : "";
  return std::string(plan::collName(c.coll)) + "/" + plan::algoName(c.algo) +
         " n=" + std::to_string(c.nranks) + " count=" + std::to_string(c.count) + " " +
         dtypeName(c.dtype) + " " + opName(c.op) + (c.inPlace ? " inplace" : "") +
         " root=" + std::to_string(c.root) + " ring=" + std::to_string(c.ringBytes) + mode;
}

transport::DevRing DeviceRings::get(int from, int to, const transport::LinkKey& key) {
  const auto k = std::make_tuple(from, to, key.channel, key.route);
  auto it = rings_.find(k);
  if (it == rings_.end()) {
    xc::DeviceBuffer mem(transport::ringBytes(capacity_));
    const transport::DevRing ring = transport::ringAt(mem.get(), capacity_);
    it = rings_.emplace(k, std::make_pair(std::move(mem), ring)).first;
  }
  return it->second.second;
}

void DeviceRings::close(int from, int to) {
  const transport::DevRing r = get(from, to, transport::LinkKey{to, 0, 0});
  const uint32_t one = 1;
  xc::Stream side;
  cudaOk(cudaMemcpyAsync(r.closed, &one, sizeof one, cudaMemcpyHostToDevice,
                         static_cast<cudaStream_t>(side.get())),
         "cudaMemcpyAsync(closed)");
  xc::synchronizeStream(side.get());
}

namespace {

uint64_t padded(uint64_t bytes) { return (bytes + 16 + 15) & ~uint64_t{15}; }

/// Sizes of A and B and where input and output sit (as the C API aliases in place).
void layOut(const ExecCase& c, int r, RankCall& rc, uint64_t& sizeA, uint64_t& sizeB) {
  const plan::CollArgs args{c.coll, c.count, c.dtype, c.op, c.root, r, c.nranks, c.inPlace};
  const plan::BufferSizes sz = plan::bufferSizesFor(args);
  const uint64_t blk = c.count * dtypeSize(c.dtype), all = blk * c.nranks;
  const bool root = r == c.root;
  sizeB = 0;
  if (c.inPlace && (c.coll == Coll::kAllReduce || c.coll == Coll::kBroadcast ||
                    c.coll == Coll::kReduce || c.coll == Coll::kAlltoAll)) {
    sizeA = std::max(sz.input, sz.output);
  } else if (c.inPlace && (c.coll == Coll::kAllGather || (c.coll == Coll::kGather && root))) {
    sizeA = all;
    rc.inOff = r * blk;
  } else if (c.inPlace && (c.coll == Coll::kReduceScatter || (c.coll == Coll::kScatter && root))) {
    sizeA = all;
    rc.outOff = r * blk;
  } else {
    sizeA = sz.input;
    sizeB = sz.output;
    rc.outInB = true;
  }
}

void upload(xc::DeviceBuffer& dev, const std::vector<uint8_t>& host) {
  dev = xc::DeviceBuffer(host.size());
  if (!host.empty()) {  // a pageable copy may return before its DMA lands
    cudaOk(cudaMemcpy(dev.get(), host.data(), host.size(), cudaMemcpyHostToDevice),
           "cudaMemcpy up");
    cudaOk(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  }
}

std::vector<uint8_t> download(const xc::DeviceBuffer& dev) {
  std::vector<uint8_t> out(dev.size());
  if (!out.empty())
    cudaOk(cudaMemcpy(out.data(), dev.get(), out.size(), cudaMemcpyDeviceToHost),
           "cudaMemcpy down");
  return out;
}

}  // namespace

std::vector<RankCall> prepareCall(const ExecCase& c, DeviceRings& rings, uint64_t seed) {
  std::vector<RankCall> calls(c.nranks);
  const size_t es = dtypeSize(c.dtype);
  for (int r = 0; r < c.nranks; ++r) {
    RankCall& rc = calls[r];
    const plan::CollArgs args{c.coll, c.count, c.dtype, c.op, c.root, r, c.nranks, c.inPlace};
    rc.program = plan::build(c.algo, args, c.params);
    rc.lowered = dv::lowerProgram(rc.program);
    uint64_t sizeA = 0, sizeB = 0;
    layOut(c, r, rc, sizeA, sizeB);
    auto a = makeInput(c.dtype, padded(sizeA) / es, seed * 131 + r);
    auto b = makeInput(c.dtype, sizeB > 0 ? padded(sizeB) / es : 0, seed * 131 + 64 + r);
    rc.hostA.assign(a.begin(), a.end());
    rc.hostB.assign(b.begin(), b.end());
    rc.hostScratch.assign(rc.program.scratchBytes, 0);
    upload(rc.devA, rc.hostA);
    upload(rc.devB, rc.hostB);
    rc.devScratch = xc::DeviceBuffer(rc.program.scratchBytes);
    std::vector<transport::DevRing> sends, recvs;
    for (const auto& k : rc.lowered.sendKeys) sends.push_back(rings.get(r, k.peer, k));
    for (const auto& k : rc.lowered.recvKeys) recvs.push_back(rings.get(k.peer, r, k));
    rc.upload = std::make_unique<xc::ProgramUpload>(rc.lowered, sends, recvs);
    rc.call.program = rc.upload->view();
    rc.call.reduce = dv::DevReduce{c.dtype, c.op, c.nranks};
    rc.call.bufs[dv::kSlotInput] = rc.devA.get() == nullptr ? nullptr : rc.devA.get() + rc.inOff;
    uint8_t* outBase = rc.outInB ? rc.devB.get() : rc.devA.get();
    rc.call.bufs[dv::kSlotOutput] = outBase == nullptr ? nullptr : outBase + rc.outOff;
    rc.call.bufs[dv::kSlotScratch] = rc.devScratch.get();
  }
  return calls;
}

void runHostReference(const ExecCase& c, std::vector<RankCall>& calls) {
  std::vector<plan::Program> programs;
  std::vector<exec::Buffers> bufs(calls.size());
  for (size_t r = 0; r < calls.size(); ++r) {
    RankCall& rc = calls[r];
    programs.push_back(rc.program);
    bufs[r].input = rc.hostA.data() + rc.inOff;
    bufs[r].output = (rc.outInB ? rc.hostB.data() : rc.hostA.data()) + rc.outOff;
    bufs[r].scratch = rc.hostScratch.data();
  }
  harness::runProgramsOnThreads(programs, bufs, exec::ReduceSpec{c.dtype, c.op, c.nranks},
                                c.ringBytes, 30.0);
}

bool waitStream(void* stream, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!xc::streamDone(stream)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

std::string launchAndWait(const std::vector<std::vector<dv::DevCall>>& perRank,
                          std::vector<std::unique_ptr<RankLaunch>>& launches, xc::LaunchMode mode,
                          double seconds) {
  while (launches.size() < perRank.size()) launches.push_back(std::make_unique<RankLaunch>());
  for (size_t r = 0; r < perRank.size(); ++r) {
    launches[r]->ctl.reset(uint64_t{30} * 1000000000ull);
    xc::launchCalls(perRank[r].data(), perRank[r].size(), launches[r]->ctl.device(),
                    launches[r]->stream.get(), xc::LaunchOptions{launches[r]->ctl.barrier(), mode});
  }
  std::string msg;
  for (size_t r = 0; r < perRank.size(); ++r) {
    if (waitStream(launches[r]->stream.get(), seconds)) continue;
    for (auto& l : launches) l->ctl.abort();
    msg += "rank " + std::to_string(r) + " did not finish in time;";
    for (auto& l : launches) waitStream(l->stream.get(), 20.0);
    break;
  }
  for (size_t r = 0; r < perRank.size(); ++r) {
    const dv::DevControl* h = launches[r]->ctl.host();
    const uint32_t st = launches[r]->ctl.status();
    if (st != dv::kDevOk) {
      msg += " rank " + std::to_string(r) + " status " + std::to_string(st) + " at call " +
             std::to_string(h->failedCall) + " phase " + std::to_string(h->failedPhase) + " lane " +
             std::to_string(h->failedLane) + " step " + std::to_string(h->failedStep) + ";";
    }
  }
  return msg;
}

std::string compareWithHost(const ExecCase& c, const std::vector<RankCall>& calls) {
  const size_t es = dtypeSize(c.dtype);
  const bool reduces =
      c.coll == Coll::kAllReduce || c.coll == Coll::kReduce || c.coll == Coll::kReduceScatter;
  const groveRedOp_t cmpOp = reduces ? c.op : groveMax;  // copies: every bit must match
  std::string msg;
  for (size_t r = 0; r < calls.size(); ++r) {
    const RankCall& rc = calls[r];
    const auto a = download(rc.devA), b = download(rc.devB);
    std::string d = compareElements(c.dtype, cmpOp, a.data(), rc.hostA.data(), a.size() / es);
    if (!d.empty()) msg += " rank " + std::to_string(r) + " buffer A: " + d;
    d = compareElements(c.dtype, cmpOp, b.data(), rc.hostB.data(), b.size() / es);
    if (!d.empty()) msg += " rank " + std::to_string(r) + " buffer B: " + d;
  }
  return msg;
}

std::string runCase(const ExecCase& c, uint64_t seed) {
  static std::vector<std::unique_ptr<RankLaunch>> launches;
  DeviceRings rings(c.ringBytes);
  std::vector<RankCall> calls = prepareCall(c, rings, seed);
  runHostReference(c, calls);
  std::vector<std::vector<dv::DevCall>> perRank;
  for (const RankCall& rc : calls) perRank.push_back({rc.call});
  const std::string failed = launchAndWait(perRank, launches, c.mode);
  if (!failed.empty()) return "device launch failed:" + failed;
  return compareWithHost(c, calls);
}

}  // namespace grove::gputest
