// process_group_coalesced.cc - the coalesced forms of all-gather and
// reduce-scatter: several tensors, one operation (one Work). The list form
// (allgather_coalesced) goes through one flat buffer and one grove
// all-gather; the tensor forms (FSDP's) run one grove call per pair inside
// one job.
#include "process_group_grove.h"

#include "staging.h"

namespace grove::pytorch {

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  const char* name = "allgather_coalesced";
  const int n = getSize();
  TORCH_CHECK(!inputs.empty(), "grove: ", name, " needs at least one input tensor");
  TORCH_CHECK(static_cast<int>(outputs.size()) == n, "grove: ", name, " needs ", n,
              " output lists (one per rank), got ", outputs.size());
  int64_t total = 0;
  for (const auto& t : inputs) {
    checkLike(t, inputs[0], t.numel(), name, "every input");
    total += t.numel();
  }
  std::vector<at::Tensor> outs;  // rank-major: rank r's copy of input i at r * inputs + i
  for (const auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "grove: ", name, ": every output list must hold ",
                inputs.size(), " tensors (one per input), got ", list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      checkLike(list[i], inputs[0], inputs[i].numel(), name, "every output");
      outs.push_back(list[i]);
    }
  }
  std::vector<at::Tensor> ins = inputs;
  return enqueue(
      ::c10d::OpType::ALLGATHER_COALESCED, name, outs, opTimeout(opts.timeout),
      [=](const Exec& x) {
        at::Tensor flat = total > 0 ? concat(ins) : at::empty({0}, ins[0].options());
        at::Tensor all = at::empty({n * total}, flat.options());
        x.check(groveAllGather(flat.data_ptr(), all.data_ptr(), countOf(flat),
                               groveTypeOf(flat, name), x.comm(), x.stream),
                name);
        scatterBlocks(all, outs);
      },
      ins);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  const char* name = "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "grove: ", name, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  std::vector<at::Tensor> ins;
  std::vector<Staged> outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], name);
    checkLike(outputs[i], inputs[i], inputs[i].numel() * getSize(), name, "an output");
    ins.push_back(inputs[i].contiguous());
    outs.push_back(Staged::of(outputs[i], false));
  }
  return enqueue(
      ::c10d::OpType::COALESCED, name, outputs, opTimeout(opts.timeout),
      [=](const Exec& x) mutable {
        for (size_t i = 0; i < ins.size(); ++i) {
          x.check(groveAllGather(ins[i].data_ptr(), outs[i].ptr(), countOf(ins[i]),
                                 groveTypeOf(ins[i], name), x.comm(), x.stream),
                  name);
          outs[i].copyBack();
        }
      },
      inputs);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "grove: ", name, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  std::vector<at::Tensor> ins;
  std::vector<Staged> outs;
  std::vector<groveRedOp_t> ops;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(outputs[i], name);
    checkLike(inputs[i], outputs[i], outputs[i].numel() * getSize(), name, "an input");
    ops.push_back(groveOpOf(opts.reduceOp, outputs[i], name));
    ins.push_back(inputs[i].contiguous());
    outs.push_back(Staged::of(outputs[i], false));
  }
  return enqueue(
      ::c10d::OpType::COALESCED, name, outputs, opTimeout(opts.timeout),
      [=](const Exec& x) mutable {
        for (size_t i = 0; i < ins.size(); ++i) {
          x.check(groveReduceScatter(ins[i].data_ptr(), outs[i].ptr(), countOf(outs[i].buf),
                                     groveTypeOf(ins[i], name), ops[i], x.comm(), x.stream),
                  name);
          outs[i].copyBack();
        }
      },
      inputs);
}

}  // namespace grove::pytorch
