// The options of `zeromem measure` and `zeromem validate` (see
// measure_command.h): registered once, here, for both the lean zeromem
// (which answers --help and bad flags itself) and its zeromem-measure helper
// (which runs them).
#include "measure_command.h"

#include "options.h"

#include <cstdlib>
#include <iostream>
#include <streambuf>
#include <string>

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

}  // namespace

void restore_stderr() {
    if (g_saved_cerr != nullptr) std::cerr.rdbuf(g_saved_cerr);
    g_saved_cerr = nullptr;
}

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

}  // namespace zeromem_cli
