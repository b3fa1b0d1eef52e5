// The measurement harness (see measure.h).
#include "zeromem/runtime/measure.h"

#include "zeromem/runtime/model.h"
#include "zeromem/runtime/zero.h"
#include "zeromem/stack_facts.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace zeromem::runtime {

namespace {

DType to_dtype(Dtype d) {
    switch (d) {
        case Dtype::fp32: return DType::f32;
        case Dtype::fp16: return DType::f16;
        case Dtype::bf16: return DType::bf16;
    }
    return DType::bf16;
}

nlohmann::json bytes_json(const std::array<std::array<uint64_t, kCategories>, kWheres>& b,
                          const std::array<uint64_t, kWheres>& total) {
    nlohmann::json j;
    for (int w = 0; w < kWheres; ++w) {
        nlohmann::json cats;
        for (int c = 0; c < kCategories; ++c) cats[to_string(static_cast<Category>(c))] = b[w][c];
        cats["total"] = total[w];
        j[to_string(static_cast<Where>(w))] = cats;
    }
    return j;
}

// Aborts every rank when a phase makes no progress for too long (a peer died
// inside a collective, a hung NCCL call): bounded time, never a hang.
class Watchdog {
public:
    Watchdog(double timeout_s, int rank) : timeout_(timeout_s), rank_(rank) {
        thread_ = std::thread([this] { loop(); });
    }
    ~Watchdog() {
        stop_ = true;
        thread_.join();
    }
    void phase(const char* name) {
        name_ = name;
        start_ = clock();
    }

private:
    static double clock() {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    }
    void loop() {
        while (!stop_) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            if (!stop_ && clock() - start_.load() > timeout_) {
                std::fprintf(stderr,
                             "zeromem: rank %d: phase %s made no progress for %.0f s (a peer failed or hung); "
                             "aborting all ranks\n", rank_, name_.load(), timeout_);
                std::fflush(stderr);
                MPI_Abort(MPI_COMM_WORLD, 4);
            }
        }
    }
    double timeout_;
    int rank_;
    std::atomic<bool> stop_{false};
    std::atomic<double> start_{clock()};
    std::atomic<const char*> name_{"init"};
    std::thread thread_;
};

// Test hooks for failure handling: ZEROMEM_TEST_KILL_RANK=r makes rank r
// kill itself with SIGKILL in the first forward; ZEROMEM_TEST_FAIL_RANK=r
// makes it throw; ZEROMEM_TEST_HANG_RANK=r makes it stop responding (the
// watchdog then aborts every rank after --phase-timeout).
void failure_hook(int rank) {
    if (const char* hng = std::getenv("ZEROMEM_TEST_HANG_RANK"); hng && std::atoi(hng) == rank)
        std::this_thread::sleep_for(std::chrono::hours(1));
    if (const char* k = std::getenv("ZEROMEM_TEST_KILL_RANK"); k && std::atoi(k) == rank) std::raise(SIGKILL);
    if (const char* f = std::getenv("ZEROMEM_TEST_FAIL_RANK"); f && std::atoi(f) == rank)
        throw std::runtime_error("injected failure (ZEROMEM_TEST_FAIL_RANK)");
}

struct PhaseClock {
    Backend& be;
    Watchdog& dog;
    double t0 = 0;
    void begin(const char* name) {
        dog.phase(name);
        be.synchronize();
        be.reset_peaks();
        Backend::reset_host_rss_peak();
        t0 = be.now();
    }
    nlohmann::json end(const char* name, int step, int micro) {
        const double t1 = be.now();
        const Usage& u = be.usage();
        return {{"name", name},
                {"step", step},
                {"micro_step", micro},
                {"seconds", t1 - t0},
                {"peak_bytes", bytes_json(u.peak, u.total_peak)},
                {"end_bytes", bytes_json(u.current, u.total_current)},
                {"device_reported_used", be.device_reported_used()},
                {"host_rss_peak", Backend::host_rss_peak()}};
    }
};

}  // namespace

// Whether the optimizer the job would run updates in place (no fp32
// temporary of the stepped elements), decided from the resolved input the
// way the training stack decides it: optimizer.params.torch_adam makes
// DeepSpeed build torch's foreach Adam(W) (engine.py
// _configure_basic_optimizer); a DeepSpeed "optimizer" block builds
// FusedAdam, and optimizer offload DeepSpeedCPUAdam (in place); a client
// optimizer is what the script passes, by default the HF Trainer's
// adamw_torch_fused from torch 2.8 with transformers >= 4.54
// (huggingface/transformers#37358), foreach adamw_torch before (torch's
// adam.py _multi_tensor_adam: one fp32 temporary). The runtime emulates one
// temporary for every foreach step (torch 2.0's second one is not made).
namespace {
bool step_in_place(const EstimateInput& in) {
    const auto& t = in.train;
    if (t.optimizer == Optimizer::sgd) return true;
    if (t.torch_adam) return false;
    if (t.fused_optimizer) return true;
    if (in.zero.offload_optimizer != OffloadDevice::none && t.optimizer_builder != OptimizerBuilder::client) return true;
    if (t.client_fused) return *t.client_fused;
    return stack_facts(in.stack).hf_trainer_defaults_to_fused_adamw;
}

}  // namespace

nlohmann::json measure_rank(const EstimateInput& in, const MeasureOptions& opt, Backend& be) {
    const ModelArch arch = runtime_arch(in, opt.layers);
    const auto& t = in.train;
    if (in.cluster.tp != 1 || in.cluster.pp != 1)
        throw InputError("measure: the runtime runs data parallelism only (--tp 1 --pp 1)");
    if (t.lora_rank > 0 || t.trainable_params || t.load_in_bits != 16)
        throw InputError("measure: the runtime trains every parameter (no LoRA, frozen or quantized weights)");
    SyntheticModel model(arch, arch.num_layers, t.seq_len, t.micro_batch, to_dtype(t.dtype), t.checkpointing);
    StageContext ctx;
    ctx.be = &be;
    ctx.model = &model;
    ctx.zero = in.zero;
    ctx.model_dtype = to_dtype(t.dtype);
    ctx.accum_dtype = to_dtype(t.grad_accum_dtype.value_or(t.dtype));
    ctx.comm_dtype = to_dtype(t.communication_dtype.value_or(t.dtype));
    ctx.fused_optimizer = step_in_place(in);
    auto stage = make_stage(ctx);
    if (in.cluster.gpu_memory) be.set_device_capacity(*in.cluster.gpu_memory);

    Watchdog dog(opt.phase_timeout_s, be.rank());
    PhaseClock pc{be, dog};
    nlohmann::json rec = {{"rank", be.rank()}, {"phases", nlohmann::json::array()}, {"oom", false}};
    const char* phase = "init";
    int step = 0;
    const auto start = std::chrono::steady_clock::now();
    try {
        pc.begin(phase);
        stage->init();
        rec["phases"].push_back(pc.end(phase, 0, 0));
        rec["partition_numel"] = stage->partition_numel();
        for (step = 1; step <= opt.steps; ++step) {
            for (int mi = 0; mi < t.grad_accum; ++mi) {
                phase = "forward";
                pc.begin(phase);
                if (step == 1 && mi == 0) failure_hook(be.rank());
                model.forward(be, *stage);
                rec["phases"].push_back(pc.end(phase, step, mi));
                phase = "backward";
                pc.begin(phase);
                stage->begin_backward(mi);
                model.backward(be, *stage);
                stage->end_backward(mi + 1 == t.grad_accum);
                rec["phases"].push_back(pc.end(phase, step, mi));
            }
            phase = "optimizer_step";
            pc.begin(phase);
            stage->step(step);
            rec["phases"].push_back(pc.end(phase, step, 0));
            if (opt.progress && be.rank() == 0) {
                const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                std::fprintf(stderr, "measure: step %d of %d, elapsed %.1f s, ETA %.1f s\n", step, opt.steps, el,
                             el / step * (opt.steps - step));
            }
        }
    } catch (const OutOfMemory& e) {
        rec["oom"] = true;
        rec["oom_detail"] = {{"phase", phase},
                             {"step", step},
                             {"requested_bytes", e.requested_bytes},
                             {"category", to_string(e.category)},
                             {"where", to_string(e.where)},
                             {"message", e.what()}};
        rec["phases"].push_back(pc.end(phase, step, 0));
    }
    model.release_all(be);
    stage->release_all();
    rec["params"] = model.total_params();
    return rec;
}

nlohmann::json gather_ranks(const nlohmann::json& mine) {
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const std::string s = mine.dump();
    int len = static_cast<int>(s.size());
    std::vector<int> lens(static_cast<size_t>(world)), displs(static_cast<size_t>(world));
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < world; ++r) {
        displs[static_cast<size_t>(r)] = total;
        total += lens[static_cast<size_t>(r)];
    }
    std::string all(static_cast<size_t>(rank == 0 ? total : 0), '\0');
    MPI_Gatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) return nullptr;
    nlohmann::json out = nlohmann::json::array();
    for (int r = 0; r < world; ++r)
        out.push_back(nlohmann::json::parse(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                                                       static_cast<size_t>(lens[static_cast<size_t>(r)]))));
    return out;
}

nlohmann::json measure(const EstimateInput& in, const MeasureOptions& opt, Backend& be) {
    const nlohmann::json mine = measure_rank(in, opt, be);
    nlohmann::json ranks = gather_ranks(mine);
    if (be.rank() != 0) return nullptr;
    const ModelArch a = runtime_arch(in, opt.layers);
    bool oom = false;
    for (const auto& r : ranks) oom = oom || r.value("oom", false);
    const auto& z = in.zero;
    const auto& t = in.train;
    return {{"backend", be.name()},
            {"device", be.device_name()},
            {"world_size", be.world()},
            {"model",
             {{"name", in.model.name}, {"layers", a.num_layers}, {"hidden_size", a.hidden_size},
              {"ffn_size", a.ffn_size}, {"vocab_size", a.vocab_size}, {"params", mine.value("params", int64_t{0})}}},
            {"settings",
             {{"zero_optimization.stage", z.stage},
              {"dtype", to_string(t.dtype)},
              {"train_micro_batch_size_per_gpu", t.micro_batch},
              {"gradient_accumulation_steps", t.grad_accum},
              {"seq_len", t.seq_len},
              {"gradient_checkpointing", to_string(t.checkpointing)},
              {"zero_optimization.offload_optimizer.device", to_string(z.offload_optimizer)},
              {"zero_optimization.offload_param.device", to_string(z.offload_param)},
              {"zero_optimization.reduce_bucket_size", z.reduce_bucket_size},
              {"zero_optimization.overlap_comm", z.overlap_comm_effective()},
              {"zero_optimization.contiguous_gradients", z.contiguous_gradients},
              {"zero_optimization.stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size},
              {"zero_optimization.stage3_param_persistence_threshold", z.stage3_param_persistence_threshold},
              {"zero_optimization.sub_group_size", z.sub_group_size},
              {"steps", opt.steps}}},
            {"units", "bytes and seconds"},
            {"oom", oom},
            {"ranks", ranks}};
}

nlohmann::json collectives_sweep(Backend& be, int64_t min_bytes, int64_t max_bytes, int iters) {
    const int n = be.world();
    nlohmann::json rows = nlohmann::json::array();
    const char* ops[] = {"all_reduce", "all_gather", "reduce_scatter"};
    for (const char* op : ops) {
        for (int64_t size = min_bytes; size <= max_bytes; size *= 2) {
            const int64_t count = std::max<int64_t>(size / 4 / n * n, n);  // elements of the full buffer
            const int64_t per = count / n;
            Tensor full = be.alloc(count, DType::f32, Category::buffers);
            Tensor part = be.alloc(per, DType::f32, Category::buffers);
            auto once = [&]() {
                if (op[4] == 'r') be.all_reduce(full, 0, count);
                else if (op[4] == 'g') be.all_gather(part, 0, full, 0, per);
                else be.reduce_scatter(full, 0, part, 0, per);
            };
            for (int w = 0; w < 2; ++w) once();
            be.barrier();
            const double t0 = be.now();
            for (int i = 0; i < iters; ++i) once();
            const double dt = (be.now() - t0) / iters;
            double tmax = dt;
            MPI_Allreduce(&dt, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            be.free(part);
            be.free(full);
            const double bytes = static_cast<double>(count) * 4.0;
            const double algbw = bytes / tmax / 1e9;
            const double factor = op[4] == 'r' ? 2.0 * (n - 1) / n : double(n - 1) / n;
            rows.push_back({{"op", op}, {"size_bytes", static_cast<int64_t>(bytes)}, {"count", count},
                            {"type", "float"}, {"time_us", tmax * 1e6}, {"algbw_GBps", algbw},
                            {"busbw_GBps", algbw * factor}});
        }
    }
    return be.rank() == 0 ? rows : nlohmann::json(nullptr);
}

std::unique_ptr<Backend> select_backend(const std::string& name, std::string& note) {
    if (name == "host") return make_host_backend();
    if (name != "cuda" && name != "auto") throw InputError("--backend: '" + name + "' is not cuda, host or auto");
    std::string why;
    auto cuda = make_cuda_backend(why);
    if (cuda) return cuda;
    if (name == "cuda") throw InputError("--backend cuda: " + why);
    note = "no usable CUDA device (" + why + "); using the host backend";
    return make_host_backend();
}

}  // namespace zeromem::runtime
