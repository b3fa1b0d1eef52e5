// Partial optimizer offload (ZeRO-Offload++ Twin-Flow,
// zero_optimization.offload_optimizer.ratio), expected values by hand from
// DeepSpeed's code (github.com/deepspeedai/DeepSpeed, runtime/zero/stage3.py;
// ratio first in v0.12.3, b1cb0dfc4 #4636):
//  - _create_fp32_partitions: with S sub-groups on a rank, sub-group i is on
//    the GPU when i >= int((1 - ratio) * S) is false, i.e. the first
//    int((1 - ratio) * S); their fp32 master is .to(cuda, fp32).clone().
//  - initialize_optimizer_states: each sub-group's fp32 gradient is
//    subgroup_gradient_buffer.to(subgroup_to_device[i]), so on the GPU for
//    those sub-groups; grad_partitions_flat_buffer stays on self.device (cpu).
//  - _optimizer_step: the GPU sub-groups are stepped by backup_optimizer, a
//    torch.optim.AdamW (exp_avg, exp_avg_sq fp32 on the GPU, foreach: one
//    fp32 temporary of the tensor it steps with torch >= 2.1); the others by
//    DeepSpeedCPUAdam on the host.
// llama-2-7b: P = 6,738,415,616; 8 GPUs: Tn = ceil(P / 8) = 842,301,952.
//  - _create_fp16_sub_groups: parameters join a sub-group in model.parameters()
//    order, each with its partition ceil(numel / 8), and the sub-group closes
//    once it reaches sub_group_size = 1e8. Partitions: embed_tokens and
//    lm_head 32000 x 4096 / 8 = 16,384,000; q, k, v, o 4096^2 / 8 =
//    2,097,152; gate, up, down 4096 x 11008 / 8 = 5,636,096; each norm 512.
//    A layer is 4 x 2,097,152 + 3 x 5,636,096 + 2 x 512 = 25,297,920.
//  - Sub-group 1: embed_tokens + layers 1-3 = 92,277,760, + q, k, v, o of
//    layer 4 (8,388,608) = 100,666,368 >= 1e8. Sub-groups 2-8: the rest of a
//    layer (gate, up, down, norms: 16,909,312) + 3 layers + the next q, k, v,
//    o = 101,191,680 each; sub-group 8 ends in layer 32. Sub-group 9: the
//    rest of layer 32 + the final norm (512) + lm_head = 33,293,824.
//    1 x 100,666,368 + 7 x 101,191,680 + 33,293,824 = 842,301,952 = Tn.
// ratio 0.3: int(0.7 * 9) = int(6.3) = 6 on the GPU: 100,666,368 + 5 x
// 101,191,680 = 606,624,768 elements, the largest 101,191,680; the host keeps
// sub-groups 7-9. No fp16/bf16 block: fp32 training.
#include "zeromem/estimate.h"
#include "zeromem/request.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <unistd.h>

using namespace zeromem;

namespace {

std::string write_cfg(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "zeromem_" + std::to_string(::getpid()) + "_" + name;
    std::ofstream(path) << text;
    return path;
}

const PhaseMemory& phase(const Estimate& e, const std::string& name) {
    for (const auto& p : e.phases)
        if (p.name == name) return p;
    ADD_FAILURE() << "no phase " << name;
    return e.phases.front();
}

Estimate run(const std::string& ratio, const std::string& version = "0.19.6") {
    const std::string cfg = R"({"train_micro_batch_size_per_gpu": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}},
        "zero_optimization": {"stage": 3, "sub_group_size": 100000000,
          "offload_optimizer": {"device": "cpu")" + (ratio.empty() ? std::string() : ", \"ratio\": " + ratio) + "}}}";
    Request req;
    req.model = "llama-2-7b";
    req.gpus = 8;
    req.deepspeed_version = version;
    req.ds_config = write_cfg("partial_" + (ratio.empty() ? std::string("none") : ratio) + ".json", cfg);
    return estimate(resolve_request(req, ZEROMEM_SOURCE_DATA_DIR).input);
}

constexpr uint64_t kGpuElems = 606624768;  // the first 6 sub-groups
constexpr uint64_t kLargestGpuSubGroup = 101191680;

}  // namespace

TEST(PartialOffload, GpuKeepsTheFirstSubGroupsStates) {
    const Estimate full = run("");
    const Estimate part = run("0.3");
    const PhaseMemory& f = phase(full, "optimizer_step");
    const PhaseMemory& p = phase(part, "optimizer_step");
    // Full offload keeps no fp32 master, gradient or Adam state on the GPU.
    EXPECT_EQ(f.per_gpu.optimizer_states, 0u);
    // fp32 master + exp_avg + exp_avg_sq of 6e8 elements: 12 B each.
    EXPECT_EQ(p.per_gpu.optimizer_states, 12 * kGpuElems);
    // fp32 gradients of those sub-groups: 4 B each, beside full offload's.
    EXPECT_EQ(p.per_gpu.gradients - f.per_gpu.gradients, 4 * kGpuElems);
    // torch AdamW's foreach temporary on the largest GPU sub-group (torch 2.8: one fp32 temporary).
    EXPECT_EQ(p.per_gpu.temporary_buffers - f.per_gpu.temporary_buffers, 4u * kLargestGpuSubGroup);
}

TEST(PartialOffload, HostKeepsTheRest) {
    const Estimate full = run("");
    const Estimate part = run("0.3");
    const PhaseMemory& f = phase(full, "optimizer_step");
    const PhaseMemory& p = phase(part, "optimizer_step");
    // Per rank the host loses the fp32 master (4 B) and CPU Adam m, v (8 B) of
    // the GPU's 606,624,768 elements, and the pinned fp32 gradient buffers of
    // sub-groups 1-6: 4 x 100,666,368 and 4 x 101,191,680 B are each
    // PowerOf2Ceil(...) = 2^29 B (pin_memory true in 0.19.6, torch >= 1.11
    // rounds pinned sizes); 8 ranks per node.
    const uint64_t per_rank = 12 * kGpuElems + 6 * (uint64_t(1) << 29);
    EXPECT_EQ(f.per_node.host_memory - p.per_node.host_memory, 8 * per_rank);
}

TEST(PartialOffload, SubGroupGranularity) {
    // ratio 0.95: int(0.05 * 9) = int(0.45) = 0 sub-groups on the GPU: as full offload.
    const Estimate none_on_gpu = run("0.95");
    EXPECT_EQ(phase(none_on_gpu, "optimizer_step").per_gpu.optimizer_states, 0u);
    // ratio 0: int(1.0 * 9) = 9, all of Tn on the GPU: 12 B x 842,301,952.
    const Estimate all_on_gpu = run("0.0");
    EXPECT_EQ(phase(all_on_gpu, "optimizer_step").per_gpu.optimizer_states, uint64_t(12) * 842301952u);
}

TEST(PartialOffload, RefusedWhereDeepSpeedRefusesIt) {
    // Before v0.12.3 the key does not exist (pydantic extra="forbid").
    EXPECT_THROW(run("0.3", "0.12.2"), InputError);
    EXPECT_NO_THROW(run("0.3", "0.12.3"));
}
