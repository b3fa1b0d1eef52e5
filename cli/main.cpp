// zeromem: how much GPU, host and NVMe memory a DeepSpeed ZeRO run needs.
// The only translation unit that includes CLI11.
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/report.h"
#include "zeromem/request.h"
#include "zeromem/util.h"

#include <CLI/CLI.hpp>

#include <iostream>

namespace {

const char* kEstimateExamples = R"(
Examples:
  zeromem estimate --params 7e9 --gpus 8 --stage 3
  zeromem estimate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 2 --micro-batch 4 --seq-len 4096
  zeromem estimate --model llama-3-8b --gpus 8 --ds-config data/ds_configs/ds_zero3_config.json --micro-batch 2 --explain
  zeromem estimate --hf-config path/to/config.json --gpus 16 --nodes 2 --stage 3 --offload-optimizer cpu --format json
  zeromem estimate --params 7e9 --largest-layer-params 131072000 --gpus 8 --stage 3 --convention deepspeed
  zeromem estimate --model llama-2-13b --gpus 8 --gpu V100-32GB --stage 3 --lora-rank 16 --gradient-checkpointing full
  zeromem estimate --model llama-2-70b --gpus 64 --nodes 8 --tp 8 --pp 2 --stage 1 --sequence-parallel

Sizes accept GB/MB/TB (powers of 1000) and GiB/MiB/TiB (powers of 1024); counts accept 7e9, 7B, 1.3b.
Output is in GiB (2^30 bytes); --format json gives integer bytes.
)";

}  // namespace

int main(int argc, char** argv) {
    using namespace zeromem;
    CLI::App app{"zeromem: GPU, host and NVMe memory of DeepSpeed ZeRO stages and offload options, before launch."};
    app.set_version_flag("--version", std::string("zeromem ") + version());
    app.require_subcommand(1);
    app.footer("\nSubcommands: estimate, models, gpus. Run `zeromem estimate --help` for the options.\n"
               "Example: zeromem estimate --params 7e9 --gpus 8 --stage 3");

    Request req;
    std::string format = "table";
    bool explain = false;
    auto* est = app.add_subcommand("estimate", "Per-GPU and per-node memory of one ZeRO configuration");
    est->footer(kEstimateExamples);

    // CLI11 2.1 has no std::optional binding: capture into temporaries with callbacks.
    auto opt_str = [&](const char* flags, std::optional<std::string>& target, const char* help, const char* group) {
        return est->add_option_function<std::string>(flags, [&target](const std::string& v) { target = v; }, help)
            ->group(group);
    };
    auto opt_int = [&](const char* flags, std::optional<int64_t>& target, const char* help, const char* group) {
        return est->add_option_function<int64_t>(flags, [&target](const int64_t& v) { target = v; }, help)
            ->group(group);
    };
    const char* gM = "Model";
    const char* gC = "Cluster";
    const char* gT = "Training";
    const char* gZ = "ZeRO";
    const char* gO = "Output";
    opt_str("--params", req.params, "Total parameters Ψ: 7e9, 7B, 1.3b, 7000000000", gM)->type_name("COUNT");
    opt_str("--model", req.model, "Preset in data/models (see `zeromem models`)", gM)->type_name("NAME");
    opt_str("--hf-config", req.hf_config, "Hugging Face config.json of the model", gM)->type_name("PATH");
    opt_str("--largest-layer-params", req.largest_layer_params,
            "Largest single module's own parameters (DeepSpeed's largest_layer_params)", gM)->type_name("COUNT");
    opt_int("--gpus", req.gpus, "Total GPUs N (= data-parallel degree N_d); default 1", gC)->type_name("N");
    opt_int("--nodes", req.nodes, "Nodes M (must divide --gpus); default 1", gC)->type_name("M");
    opt_int("--tp", req.tp, "Tensor-parallel size (default 1); N_d = gpus / (tp x pp)", gC)->type_name("T");
    opt_int("--pp", req.pp, "Pipeline-parallel size (default 1; ZeRO stage 0 or 1 only)", gC)->type_name("P");
    opt_str("--gpu", req.gpu, "GPU preset in data/gpus (see `zeromem gpus`)", gC)->type_name("NAME");
    opt_str("--gpu-memory", req.gpu_memory, "Memory per GPU, e.g. 80GiB (overrides --gpu)", gC)->type_name("SIZE");
    opt_str("--host-memory", req.host_memory, "Host RAM per node, e.g. 1TB", gC)->type_name("SIZE");
    opt_str("--dtype", req.dtype, "Model dtype: bf16 (default), fp16, fp32", gT)->type_name("DTYPE");
    opt_int("--micro-batch", req.micro_batch, "Micro batch per GPU (train_micro_batch_size_per_gpu); default 1", gT)->type_name("N");
    opt_int("--seq-len", req.seq_len, "Sequence length in tokens; default 2048", gT)->type_name("N");
    opt_int("--grad-accum", req.grad_accum, "Gradient accumulation steps; default 1", gT)->type_name("N");
    opt_str("--gradient-checkpointing", req.checkpointing, "none (default), full or selective", gT)->type_name("MODE");
    opt_str("--optimizer", req.optimizer, "adamw (default), adam or sgd", gT)->type_name("NAME");
    opt_str("--attention", req.attention, "flash (default: no s^2 scores kept) or eager", gT)->type_name("KIND");
    est->add_flag("--sequence-parallel", req.sequence_parallel, "Megatron sequence parallelism (with --tp > 1)")->group(gT);
    opt_str("--trainable-params", req.trainable_params, "Parameters that are trained; the rest are frozen (no grads, no optimizer state)", gT)->type_name("COUNT");
    opt_int("--lora-rank", req.lora_rank, "Train LoRA adapters of rank R on a frozen base", gT)->type_name("R");
    opt_str("--lora-target", req.lora_targets, "Projections with adapters (default q,k,v,o; also gate,up,down)", gT)->type_name("LIST");
    opt_str("--load-in", req.load_in, "Frozen base weights quantized: 4bit (QLoRA NF4) or 8bit", gT)->type_name("BITS");
    opt_str("--optimizer-impl", req.optimizer_impl, "torch (default without a DeepSpeed \"optimizer\" block) or fused", gT)->type_name("KIND");
    est->add_flag("--ds-checkpointing", req.ds_checkpointing,
                  "The model uses deepspeed.checkpointing, so the config's activation_checkpointing keys apply")->group(gT);
    opt_int("--stage", req.stage, "ZeRO stage 0..3; default 0 (or the DeepSpeed config's)", gZ)->type_name("0..3");
    opt_str("--offload-optimizer", req.offload_optimizer, "none, cpu or nvme", gZ)->type_name("DEVICE");
    opt_str("--offload-param", req.offload_param, "none, cpu or nvme (stage 3)", gZ)->type_name("DEVICE");
    est->add_flag_function("--zero-init,!--no-zero-init",
                           [&req](std::int64_t count) { req.zero_init = count > 0; },
                           "Model built under deepspeed.zero.Init (default on)")->group(gZ);
    opt_str("--ds-config", req.ds_config, "DeepSpeed config JSON; \"auto\" values resolved the HF Trainer way; flags override it", gZ)->type_name("PATH");
    opt_str("--convention", req.convention, "full (default: what DeepSpeed allocates), deepspeed (its estimator), paper (ZeRO Table 1)", gO)->type_name("NAME");
    est->add_flag("--legacy-zero2", req.legacy_zero2_formula,
                  "deepspeed convention: ZeRO-2 formula of DeepSpeed v0.4.2-v0.14.2 (4Ψ + 16Ψ/N)")->group(gO);
    opt_str("--cuda-context", req.cuda_context, "CUDA context per process (default 512MiB)", gO)->type_name("SIZE");
    est->add_option_function<double>("--fragmentation", [&req](const double& v) { req.fragmentation = v; },
                                      "Allocator fragmentation allowance, fraction of the peak (default 0.05)")
        ->group(gO)->type_name("FRACTION");
    opt_str("--load-dtype", req.load_dtype, "dtype of the host copy at load time (default fp32)", gO)->type_name("DTYPE");
    opt_str("--host-overhead", req.host_overhead, "Host RAM of one training process before the model (default 1GiB)", gO)->type_name("SIZE");
    est->add_option("--format", format, "table (default), json, csv or md")->group(gO)->type_name("FORMAT");
    est->add_flag("--explain", explain, "Print each formula with numbers and its source, and where each setting came from")->group(gO);

    auto* models = app.add_subcommand("models", "List the model presets in data/models");
    models->footer("\nExample: zeromem models");
    auto* gpus = app.add_subcommand("gpus", "List the GPU presets in data/gpus");
    gpus->footer("\nExample: zeromem gpus");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }

    try {
        const std::string dir = data_dir();
        if (*models) {
            for (const auto& n : list_model_presets(dir)) {
                const ModelArch a = load_model_preset(n, dir);
                std::printf("%-14s %8.2f B params  (h=%lld, L=%lld, heads=%lld, kv=%lld, vocab=%lld)\n", n.c_str(),
                            double(count_params(a).total) / 1e9, (long long)a.hidden_size, (long long)a.num_layers,
                            (long long)a.num_heads, (long long)a.num_kv_heads, (long long)a.vocab_size);
            }
            return 0;
        }
        if (*gpus) {
            for (const auto& n : list_gpu_presets(dir)) {
                const GpuSpec g = load_gpu_preset(n, dir);
                std::printf("%-14s %8s GiB\n", n.c_str(), format_gib(double(g.memory_bytes)).c_str());
            }
            return 0;
        }
        const Format fmt = parse_format(format);
        const Resolved res = resolve_request(req, dir);
        for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
        const Estimate e = estimate(res.input, explain);
        std::cout << render(e, res, fmt, explain);
        return 0;
    } catch (const InputError& e) {
        std::cerr << "zeromem: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "zeromem: internal error: " << e.what() << "\n";
        return 3;
    }
}
