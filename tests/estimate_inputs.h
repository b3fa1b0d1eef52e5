// Input builders shared by the estimator tests. They build EstimateInput the
// way request.cpp does from --params or --model, without the CLI.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/model.h"

#include <gtest/gtest.h>

#include <string>

namespace testinputs {

/// A full-convention input from a bare parameter count (no architecture, so
/// no activations), as `zeromem --params P` builds it.
inline zeromem::EstimateInput params_input(uint64_t params, int64_t gpus, int stage, zeromem::Dtype dtype) {
    zeromem::EstimateInput in;
    in.convention = zeromem::Convention::full;
    in.model.params = params;
    in.cluster.gpus = gpus;
    in.zero.stage = stage;
    in.train.dtype = dtype;
    return in;
}

/// A full-convention input from a preset in data/models, with params and the
/// largest module counted from the architecture (as request.cpp does).
inline zeromem::EstimateInput preset_input(const std::string& name, int64_t gpus, int stage, zeromem::Dtype dtype) {
    zeromem::EstimateInput in = params_input(0, gpus, stage, dtype);
    const zeromem::ModelArch arch = zeromem::load_model_preset(name, ZEROMEM_SOURCE_DATA_DIR);
    const zeromem::ParamCount pc = zeromem::count_params(arch);
    in.model.name = arch.name;
    in.model.params = pc.total;
    in.model.largest_layer_params = pc.largest_module;
    in.model.arch = arch;
    return in;
}

/// User case C20 (https://github.com/deepspeedai/DeepSpeed/issues/4571):
/// 6.7e9 GPT-3-style model on one 24 GB RTX 3090 with ~31 GB host RAM,
/// ZeRO-3 with NVMe offload of parameters and optimizer, param buffer_count
/// 5 x buffer_size 1e9, max_in_cpu 1e9, optimizer buffer_count 4,
/// sub_group_size 1e9, max_live 1e8, prefetch 0, fp16.
inline zeromem::EstimateInput c20_input() {
    zeromem::EstimateInput in = params_input(6700000000, 1, 3, zeromem::Dtype::fp16);
    in.zero.offload_param = zeromem::OffloadDevice::nvme;
    in.zero.offload_optimizer = zeromem::OffloadDevice::nvme;
    in.zero.offload_param_buffer_count = 5;
    in.zero.offload_param_buffer_size = 1000000000;
    in.zero.offload_param_max_in_cpu = 1000000000;
    in.zero.offload_optimizer_buffer_count = 4;
    in.zero.sub_group_size = 1000000000;
    in.zero.stage3_max_live_parameters = 100000000;
    in.zero.stage3_prefetch_bucket_size = 0;
    in.cluster.host_memory = 31000000000ull;
    return in;
}

/// The GPT-3 175B shape of Korthikanti et al. 2022 Table 3 (h = 12288,
/// 96 layers, 96 heads, MHA, plain MLP f = 4h, V = 51200), for activation
/// formulas.
inline zeromem::ModelArch gpt3_175b_shape() {
    zeromem::ModelArch a;
    a.hidden_size = 12288;
    a.num_layers = 96;
    a.num_heads = 96;
    a.num_kv_heads = 96;
    a.head_dim = 128;
    a.ffn_size = 4 * 12288;
    a.vocab_size = 51200;
    // Megatron GPT (the paper's setting): hidden and attention dropout 0.1,
    // so every Korthikanti dropout mask is stored.
    a.embedding_dropout = a.attention_dropout = a.attention_residual_dropout = a.mlp_residual_dropout = 0.1;
    // Megatron's LayerNorm (weight and bias), whose saved input is Korthikanti's LayerNorm term.
    a.norm_has_bias = true;
    return a;
}

/// The named phase of an estimate (a test failure if absent).
inline const zeromem::PhaseMemory& phase(const zeromem::Estimate& e, const std::string& name) {
    for (const auto& p : e.phases)
        if (p.name == name) return p;
    ADD_FAILURE() << "no phase " << name;
    static const zeromem::PhaseMemory none{};
    return none;
}

/// DeepSpeed's tensors only: no CUDA context, NCCL buffers or cuBLAS
/// workspaces (process_terms.h), no fragmentation allowance.
inline void no_residuals(zeromem::EstimateInput& in) {
    in.residual.cuda_context = 0;
    in.residual.nccl_buffers = 0;  // DeepSpeed's tensors only: no per-process terms
    in.residual.cublas_workspaces = 0;
    in.residual.fragmentation_fraction = 0.0;
}

}  // namespace testinputs
