// `zeromem measure` / `zeromem validate` (see measure_command.h). A thin
// face: MPI start-up, option plumbing, printing; the runtime measures and
// compares.
#include "measure_command.h"

#include "options.h"

#include "zeromem/estimate.h"
#include "zeromem/util.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <streambuf>
#include <fstream>
#include <iostream>
#include <sstream>

#ifdef ZEROMEM_HAVE_RUNTIME
#include "zeromem/runtime/measure.h"

#include <mpi.h>
#include <unistd.h>
#endif

namespace zeromem_cli {

namespace {

const char* kMeasureExamples = R"(
Examples:
  mpirun -np 4 zeromem measure --model llama-2-7b --layers 2 --stage 3 --micro-batch 1 --seq-len 512 --output m.json
  mpirun -np 2 zeromem measure --hf-config config.json --ds-config ds.json --backend host
  mpirun -np 8 zeromem measure --model llama-2-7b --collectives --max-bytes 1GiB
  mpirun -H node1:8,node2:8 -np 16 zeromem measure ...      srun -N 2 --ntasks-per-node 8 zeromem measure ...

One process per GPU. Exit status 0 fits, 1 out of memory (the host backend holds each rank to its share of
90% of MemAvailable), 2 bad input, 3 internal error. Memory in bytes in the JSON, GiB (2^30 bytes) in the table; time in seconds.
)";

const char* kValidateExamples = R"(
Examples:
  mpirun -np 4 zeromem validate --model llama-2-7b --layers 2 --stage 2 --seq-len 512
  zeromem validate --model llama-2-7b --layers 2 --stage 2 --gpus 4 --measurement m.json --format json

Exit status 0 when every component is within --tolerance, 1 otherwise or on out of memory, 2 for bad input
(a --measurement of another model, layer count, stage or rank count than the inputs included).
)";

// Refuses a value that is not a number greater than 0 (CLI11 prefixes the option's name).
std::string positive_number(std::string& v) {
    size_t used = 0;
    double d = 0;
    try {
        d = std::stod(v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != v.size()) return "'" + v + "' is not a number";
    return d > 0 ? std::string() : "must be greater than 0, got " + v;
}

void add_run_flags(CLI::App* s, MeasureFlags& f) {
    const CLI::Validator positive(positive_number, "POSITIVE");
    const char* g = "Runtime";
    s->add_option("--backend", f.backend, "cuda, host or auto (default: cuda when a device is usable)")->group(g)->type_name("NAME");
    s->add_option("--layers", f.layers, "Transformer blocks to build (default: all of the model's)")->group(g)->type_name("K")
        ->check(positive);
    s->add_option("--steps", f.steps, "Optimizer steps to run (default 2)")->group(g)->type_name("N")->check(positive);
    s->add_option("--phase-timeout", f.phase_timeout, "Seconds a phase may take before every rank aborts (default 600)")
        ->group(g)->type_name("S")->check(positive);
}

// This process's rank as the launcher sets it before MPI_Init (OpenMPI,
// PMIx, MPICH's PMI, Slurm's srun); 0 when no launcher says.
int launcher_rank() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
        if (const char* r = std::getenv(v)) return std::atoi(r);
    return 0;
}

// Swallows what is written to it.
class NullBuffer : public std::streambuf {
protected:
    int overflow(int c) override { return traits_type::not_eof(c); }
};
NullBuffer g_null;
std::streambuf* g_saved_cerr = nullptr;

// Option parsing happens before MPI starts, on every rank alike: ranks other
// than 0 keep stderr quiet until run_measure/run_validate so that a
// command-line error is printed once, not once per rank.
void quiet_other_ranks() {
    if (launcher_rank() != 0 && g_saved_cerr == nullptr) g_saved_cerr = std::cerr.rdbuf(&g_null);
}

void restore_stderr() {
    if (g_saved_cerr != nullptr) std::cerr.rdbuf(g_saved_cerr);
    g_saved_cerr = nullptr;
}

}  // namespace

void add_measure_commands(CLI::App& app, zeromem::Request& req, MeasureFlags& f, CLI::App*& measure,
                          CLI::App*& validate, bool measure_options, bool validate_options) {
    measure = app.add_subcommand("measure", "Run real partitioned ZeRO steps (under mpirun) and measure memory and time per rank and phase");
    measure->footer(kMeasureExamples);
    validate = app.add_subcommand("validate", "Hold the estimate against a measurement: per component and phase, exit 1 beyond --tolerance");
    validate->footer(kValidateExamples);
    if (measure_options != validate_options) quiet_other_ranks();  // the command line names measure or validate
    if (measure_options) add_measure_options(measure, req, f);
    if (validate_options) add_validate_options(validate, req, f);
}

void add_measure_options(CLI::App* measure, zeromem::Request& req, MeasureFlags& f) {
    add_request_options(measure, req);
    add_run_flags(measure, f);
    measure->add_option("--output", f.output, "Write the JSON of all ranks to PATH (rank 0)")->group("Output")->type_name("PATH");
    measure->add_option("--format", f.format, "table (default) or json on stdout")->group("Output")->type_name("FORMAT");
    measure->add_flag("--collectives", f.collectives, "Sweep all-reduce, all-gather and reduce-scatter (nccl-tests columns) instead")
        ->group("Runtime");
    measure->add_option("--min-bytes", f.min_bytes, "Smallest collective size (default 1KiB)")->group("Runtime")->type_name("SIZE");
    measure->add_option("--max-bytes", f.max_bytes, "Largest collective size (default 64MiB)")->group("Runtime")->type_name("SIZE");
    measure->add_option("--iters", f.iters, "Timed iterations per collective size (default 5)")->group("Runtime")->type_name("N");
}

void add_validate_options(CLI::App* validate, zeromem::Request& req, MeasureFlags& f) {
    add_request_options(validate, req);
    add_run_flags(validate, f);
    validate->add_option("--measurement", f.measurement, "Use this measure JSON instead of running the steps")->group("Input")->type_name("PATH");
    validate->add_option("--tolerance", f.tolerance, "Largest relative error that passes (default 0.05)")->group("Output")->type_name("FRACTION");
    validate->add_option("--format", f.format, "table (default) or json")->group("Output")->type_name("FORMAT");
}

#ifndef ZEROMEM_HAVE_RUNTIME

int run_measure(const zeromem::Request&, const MeasureFlags&, const std::string&) {
    restore_stderr();
    std::cerr << "zeromem: error: this zeromem was built without the runtime (MPI not found at configure time, or ZEROMEM_ENABLE_RUNTIME=OFF); "
                 "install OpenMPI (libopenmpi-dev openmpi-bin) and rebuild to use measure and validate\n";
    return 3;
}
int run_validate(const zeromem::Request& r, const MeasureFlags& f, const std::string& d) { return run_measure(r, f, d); }

#else

namespace {

using nlohmann::json;
namespace rt = zeromem::runtime;

// MPI for the life of one subcommand; failures anywhere abort every rank.
// Without `start` (validate of a saved measurement) MPI is not started: one
// process, rank 0 of 1.
struct MpiSession {
    int rank = 0, world = 1;
    bool started = false;
    explicit MpiSession(bool start = true) : started(start) {
        if (!start) return;
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world);
    }
    ~MpiSession() {
        if (started) MPI_Finalize();
    }
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
    int nodes() const {
        if (!started) return 1;
        MPI_Comm local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
        int local_size = 1;
        MPI_Comm_size(local, &local_size);
        MPI_Comm_free(&local);
        return world / local_size;
    }
    /// Rank 0's `value` on every rank.
    int from_rank0(int value) const {
        if (started) MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
        return value;
    }
};

// Resolves the request with the job's size as --gpus (and node count).
zeromem::Resolved resolve_for_job(zeromem::Request req, const MeasureFlags& f, const MpiSession& mpi,
                                  const std::string& dir, bool from_file) {
    if (!from_file) {
        if (req.gpus && *req.gpus != mpi.world && mpi.rank == 0)
            std::cerr << "zeromem: warning: --gpus " << *req.gpus << " replaced by the job's " << mpi.world << " ranks\n";
        req.gpus = mpi.world;
        if (!req.nodes) req.nodes = mpi.nodes();
    }
    zeromem::Resolved res = zeromem::resolve_request(req, dir);
    zeromem::require_single_model(res, "measure");
    if (f.layers > 0) {  // the estimate of the K-layer model the runtime builds
        res.input.model.arch = rt::runtime_arch(res.input, f.layers);
        const zeromem::ParamCount pc = zeromem::count_params(*res.input.model.arch);
        res.input.model.params = pc.total;
        res.input.model.largest_layer_params = pc.largest_module;
    }
    if (mpi.rank == 0)
        for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
    return res;
}

std::string gib4(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", double(b) / 1073741824.0);
    return buf;
}

void print_measure_table(const json& m) {
    std::printf("zeromem measure: %s backend, %d ranks, %s (%lld layers, %lld params); GiB = 2^30 bytes\n",
                m["backend"].get<std::string>().c_str(), m["world_size"].get<int>(),
                m["model"]["name"].get<std::string>().c_str(), (long long)m["model"]["layers"].get<int64_t>(),
                (long long)m["model"]["params"].get<int64_t>());
    std::printf("%-4s %-15s %4s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "rank", "phase", "step", "params", "grads",
                "optim", "activ", "buffers", "workspc", "host", "pinned", "time s");
    for (const auto& r : m["ranks"]) {
        for (const auto& p : r["phases"]) {
            const auto& d = p["peak_bytes"]["device"];
            std::printf("%-4d %-15s %4d %9s %9s %9s %9s %9s %9s %9s %9s %9.3f\n", r["rank"].get<int>(),
                        p["name"].get<std::string>().c_str(), p["step"].get<int>(),
                        gib4(d["parameters"]).c_str(), gib4(d["gradients"]).c_str(),
                        gib4(d["optimizer_states"]).c_str(), gib4(d["activations"]).c_str(),
                        gib4(d["buffers"]).c_str(), gib4(d["workspace"]).c_str(),
                        gib4(p["peak_bytes"]["host"]["total"]).c_str(), gib4(p["peak_bytes"]["pinned"]["total"]).c_str(),
                        p["seconds"].get<double>());
        }
        if (r.value("oom", false))
            std::printf("rank %d: OUT OF MEMORY in %s: %s\n", r["rank"].get<int>(),
                        r["oom_detail"]["phase"].get<std::string>().c_str(),
                        r["oom_detail"]["message"].get<std::string>().c_str());
    }
}

void print_collectives(const json& rows) {
    std::printf("# nccl-tests columns; size = bytes of the full buffer, GB/s = 1e9 B/s\n");
    std::printf("%-15s %12s %12s %6s %10s %9s %9s\n", "op", "size(B)", "count", "type", "time(us)", "algbw", "busbw");
    for (const auto& r : rows)
        std::printf("%-15s %12lld %12lld %6s %10.1f %9.2f %9.2f\n", r["op"].get<std::string>().c_str(),
                    (long long)r["size_bytes"].get<int64_t>(), (long long)r["count"].get<int64_t>(), "float",
                    r["time_us"].get<double>(), r["algbw_GBps"].get<double>(), r["busbw_GBps"].get<double>());
}

template <class Fn>
int guarded(const MpiSession& mpi, Fn fn) {
    try {
        return fn();
    } catch (const zeromem::InputError& e) {  // the same on every rank: exit cleanly with 2
        if (mpi.rank == 0) std::cerr << "zeromem: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        if (!mpi.started) {
            std::cerr << "zeromem: internal error: " << e.what() << "\n";
            return 3;
        }
        std::cerr << "zeromem: rank " << mpi.rank << ": error: " << e.what() << "; aborting all ranks\n";
        std::cerr.flush();
        MPI_Abort(MPI_COMM_WORLD, 3);
        return 3;
    }
}

json run_steps(const zeromem::Resolved& res, const MeasureFlags& f, const MpiSession& mpi) {
    std::string note;
    auto be = rt::select_backend(f.backend, note);
    if (!note.empty() && mpi.rank == 0) std::cerr << "zeromem: " << note << "\n";
    rt::MeasureOptions o;
    o.backend = f.backend;
    o.layers = 0;  // resolve_for_job already applied --layers
    o.steps = f.steps;
    o.phase_timeout_s = f.phase_timeout;
    if (f.steps <= 0) throw zeromem::InputError("--steps: must be positive");
    return rt::measure(res.input, o, *be);
}

// What stops `path` being written, or "" (checked before the run, so that a
// bad --output does not waste it).
std::string output_problem(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path p(path);
    if (fs::is_directory(p, ec)) return path + " is a directory";
    const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    if (!fs::is_directory(dir, ec)) return "cannot write " + path + ": directory " + dir.string() + " does not exist";
    const bool ok = fs::exists(p, ec) ? ::access(path.c_str(), W_OK) == 0 : ::access(dir.c_str(), W_OK) == 0;
    return ok ? "" : "cannot write " + path + ": permission denied";
}

// Rank 0 checks --output; every rank refuses alike (exit 2) when it cannot be written.
void check_output(const MeasureFlags& f, const MpiSession& mpi) {
    if (f.output.empty()) return;
    const std::string why = mpi.rank == 0 ? output_problem(f.output) : "";
    if (mpi.from_rank0(why.empty() ? 0 : 1) != 0)
        throw zeromem::InputError("--output: " + (why.empty() ? "cannot write " + f.output : why));
}

void write_output(const std::string& path, const json& j) {
    if (path.empty()) return;
    std::ofstream out(path);
    if (!out) throw zeromem::InputError("--output: cannot write " + path);
    out << j.dump(2) << "\n";
}

// Reads a `zeromem measure --output` file. Errors: InputError naming
// --measurement for a missing file, a directory, an empty file, text that is
// not JSON, or JSON without the measure result's keys.
json load_measurement(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string at = "--measurement: " + path;
    const char* expected = " (expected the JSON written by zeromem measure --output)";
    if (!fs::exists(path, ec)) throw zeromem::InputError(at + ": no such file");
    if (fs::is_directory(path, ec)) throw zeromem::InputError(at + " is a directory" + expected);
    std::ifstream in(path);
    if (!in) throw zeromem::InputError(at + ": cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw zeromem::InputError(at + " is empty" + expected);
    json m;
    try {
        m = json::parse(text);
    } catch (const json::parse_error& e) {
        throw zeromem::InputError(at + " is not valid JSON (at byte " + std::to_string(e.byte) + ")" + expected);
    }
    if (!m.is_object() || !m.contains("ranks") || !m["ranks"].is_array() || !m.contains("model") ||
        !m["model"].is_object() || !m.contains("settings") || !m["settings"].is_object() || !m.contains("world_size"))
        throw zeromem::InputError(at + " is not a measure result (needs \"model\", \"settings\", \"world_size\" and \"ranks\")");
    return m;
}

// Refuses a measurement of another run than the inputs describe: model,
// layers, ZeRO stage, ranks, micro batch, gradient accumulation steps,
// sequence length and dtype, as the measure JSON records them.
void check_measurement_matches(const json& m, const zeromem::EstimateInput& in, const std::string& path) {
    std::string diffs;
    auto differ = [&](const std::string& what, const json& obj, const char* key, const json& given) {
        const json recorded = obj.contains(key) ? obj[key] : json();
        if (recorded == given) return;
        diffs += (diffs.empty() ? "" : "; ") + what + " " + recorded.dump() + " in the file, " + given.dump() +
                 " in the inputs";
    };
    const json& mm = m["model"];
    const json& st = m["settings"];
    differ("model", mm, "name", in.model.name);
    differ("layers (--layers)", mm, "layers", in.model.arch ? in.model.arch->num_layers : int64_t{0});
    differ("zero_optimization.stage", st, "zero_optimization.stage", in.zero.stage);
    differ("ranks (--gpus)", m, "world_size", in.cluster.gpus);
    differ("train_micro_batch_size_per_gpu", st, "train_micro_batch_size_per_gpu", in.train.micro_batch);
    differ("gradient_accumulation_steps", st, "gradient_accumulation_steps", in.train.grad_accum);
    differ("seq_len", st, "seq_len", in.train.seq_len);
    differ("dtype", st, "dtype", zeromem::to_string(in.train.dtype));
    if (!diffs.empty())
        throw zeromem::InputError("--measurement: " + path + " does not match the inputs: " + diffs);
}

}  // namespace

int run_measure(const zeromem::Request& req, const MeasureFlags& f, const std::string& dir) {
    restore_stderr();
    MpiSession mpi;
    return guarded(mpi, [&]() {
        if (f.format != "table" && f.format != "json") throw zeromem::InputError("--format: use table or json");
        check_output(f, mpi);
        if (f.collectives) {
            std::string note;
            auto be = rt::select_backend(f.backend, note);
            if (!note.empty() && mpi.rank == 0) std::cerr << "zeromem: " << note << "\n";
            const int64_t lo = static_cast<int64_t>(zeromem::parse_bytes(f.min_bytes, "--min-bytes"));
            const int64_t hi = static_cast<int64_t>(zeromem::parse_bytes(f.max_bytes, "--max-bytes"));
            if (lo <= 0 || hi < lo) throw zeromem::InputError("--min-bytes/--max-bytes: need 0 < min <= max");
            if (f.iters <= 0) throw zeromem::InputError("--iters: must be positive");
            const json rows = rt::collectives_sweep(*be, lo, hi, f.iters);
            if (mpi.rank != 0) return 0;
            const json out = {{"backend", be->name()}, {"device", be->device_name()}, {"world_size", mpi.world},
                              {"collectives", rows}};
            write_output(f.output, out);
            if (f.format == "json") std::cout << out.dump(2) << "\n";
            else print_collectives(rows);
            return 0;
        }
        const zeromem::Resolved res = resolve_for_job(req, f, mpi, dir, false);
        const json m = run_steps(res, f, mpi);
        int status = 0;  // exit 1 when a rank ran out of memory: the run does not fit
        if (mpi.rank == 0) {
            write_output(f.output, m);
            if (f.format == "json") std::cout << m.dump(2) << "\n";
            else print_measure_table(m);
            status = m.value("oom", false) ? 1 : 0;
            if (status != 0) std::cerr << "zeromem: out of memory: the run does not fit (exit 1)\n";
        }
        return mpi.from_rank0(status);
    });
}

int run_validate(const zeromem::Request& req_in, const MeasureFlags& f, const std::string& dir) {
    restore_stderr();
    const bool from_file = !f.measurement.empty();
    MpiSession mpi(!from_file);  // a saved measurement needs no MPI
    return guarded(mpi, [&]() {
        if (f.format != "table" && f.format != "json") throw zeromem::InputError("--format: use table or json");
        if (!(f.tolerance >= 0)) throw zeromem::InputError("--tolerance: must be a fraction >= 0");
        json m;
        zeromem::Request req = req_in;
        if (from_file) {
            m = load_measurement(f.measurement);
            if (!req.gpus && m["world_size"].is_number_integer()) req.gpus = m["world_size"].get<int64_t>();
        }
        zeromem::Resolved res = resolve_for_job(req, f, mpi, dir, from_file);
        res.input.convention = zeromem::Convention::full;
        if (from_file) check_measurement_matches(m, res.input, f.measurement);
        else m = run_steps(res, f, mpi);
        int status = 0;
        if (mpi.rank == 0) {
            const zeromem::Estimate e = zeromem::estimate(res.input);
            json cmp;
            try {
                cmp = rt::compare_with_estimate(e, res.input, m, f.tolerance);
            } catch (const json::exception& ex) {
                if (!from_file) throw;
                throw zeromem::InputError("--measurement: " + f.measurement + " is not a measure result: " + ex.what());
            }
            json out = cmp;
            out["oom"] = m.value("oom", false);
            if (f.format == "json") {
                std::cout << out.dump(2) << "\n";
            } else {
                std::printf("zeromem validate: full-convention estimate vs measurement (max over %zu ranks); GiB = 2^30 bytes\n",
                            m["ranks"].size());
                std::printf("%-18s %-16s %12s %12s %9s\n", "component", "phase", "estimated", "measured", "error");
                for (const auto& c : cmp["components"])
                    std::printf("%-18s %-16s %12s %12s %8.2f%%%s\n", c["name"].get<std::string>().c_str(),
                                c["phase"].get<std::string>().c_str(), gib4(c["estimated"]).c_str(),
                                gib4(c["measured"]).c_str(), 100.0 * c["rel_error"].get<double>(),
                                std::abs(c["rel_error"].get<double>()) > f.tolerance ? "  FAIL" : "");
                std::printf("%s (tolerance %.1f%%)\n", cmp["pass"].get<bool>() ? "PASS" : "FAIL", 100.0 * f.tolerance);
            }
            status = cmp["pass"].get<bool>() && !m.value("oom", false) ? 0 : 1;
        }
        return mpi.from_rank0(status);
    });
}

#endif

}  // namespace zeromem_cli
