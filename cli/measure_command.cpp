// `zeromem measure` / `zeromem validate` of a fresh run (see
// measure_command.h), in the zeromem-measure helper only: MPI start-up,
// option plumbing, printing; the runtime measures and compares.
#include "measure_command.h"
#include "validate_report.h"

#include "zeromem/estimate.h"
#include "zeromem/runtime/measure.h"
#include "zeromem/util.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace zeromem_cli {

namespace {

using nlohmann::json;
namespace rt = zeromem::runtime;

// MPI for the life of one subcommand; failures anywhere abort every rank.
// Without `start` MPI is not started: one process, rank 0 of 1.
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
                                  const std::string& dir) {
    if (req.gpus && *req.gpus != mpi.world && mpi.rank == 0)
        std::cerr << "zeromem: warning: --gpus " << *req.gpus << " replaced by the job's " << mpi.world << " ranks\n";
    req.gpus = mpi.world;
    if (!req.nodes) req.nodes = mpi.nodes();
    return resolve_runtime_request(req, f, dir, mpi.rank == 0);
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
        const zeromem::Resolved res = resolve_for_job(req, f, mpi, dir);
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

int run_validate(const zeromem::Request& req, const MeasureFlags& f, const std::string& dir) {
    if (!f.measurement.empty()) return run_validate_file(req, f, dir);  // a saved measurement needs no MPI
    restore_stderr();
    MpiSession mpi;
    return guarded(mpi, [&]() {
        check_validate_flags(f);
        zeromem::Resolved res = resolve_for_job(req, f, mpi, dir);
        res.input.convention = zeromem::Convention::full;
        const json m = run_steps(res, f, mpi);
        const int status = mpi.rank == 0 ? report_validation(res.input, m, f) : 0;
        return mpi.from_rank0(status);
    });
}

}  // namespace zeromem_cli
