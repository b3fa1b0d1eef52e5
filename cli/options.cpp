// Shared option registration for the zeromem subcommands (see options.h).
#include "options.h"

#include "zeromem/diagnostics.h"
#include "zeromem/optimizer_state.h"
#include "zeromem/util.h"

#include <iostream>

namespace zeromem_cli {

std::vector<std::string> unused_flag_notes(const CLI::App* sub, const std::string& group) {
    std::vector<std::string> notes;
    for (const CLI::Option* o : sub->get_options([&group](const CLI::Option* o) { return o->get_group() == group; }))
        if (o->count() > 0)
            notes.push_back(o->get_name() + ": " + sub->get_name() +
                            " does not use it (the speed model's flag, for compare and plan); ignored");
    return notes;
}

void add_speed_options(CLI::App* sub, SpeedFlags& f, const char* group) {
    const char* g = group;
    sub->add_option_function<std::string>("--global-batch", [&f](const std::string& v) {
        try {
            f.global_batch = zeromem::parse_int(v, "--global-batch");
        } catch (const zeromem::InputError& e) {
            throw CLI::ValidationError(e.what());
        }
    },
                                      "Samples per optimizer step over all GPUs (train_batch_size); default 16 per GPU")
        ->group(g)->type_name("N");
    sub->add_option("--interconnect", f.interconnect, "Intra-node interconnect preset (default: the GPU's; see `zeromem interconnects`)")
        ->group(g)->type_name("NAME");
    sub->add_option("--network", f.network, "Inter-node network preset, required with --nodes > 1 (e.g. ib-ndr400)")
        ->group(g)->type_name("NAME");
    sub->add_option_function<double>("--cpu-adam-rate", [&f](const double& v) { f.cpu_adam_rate = v; },
                                     "CPU Adam parameters/s per node under optimizer offload (default 1.5e9)")
        ->group(g)->type_name("RATE");
    sub->add_option_function<double>("--pcie-bandwidth", [&f](const double& v) { f.pcie_bandwidth = v; },
                                     "GPU<->host bytes/s per direction (default: the GPU preset's)")
        ->group(g)->type_name("BYTES_PER_S");
    sub->add_option_function<std::string>("--nvme-read", [&f](const std::string& v) { f.nvme_read = v; },
                                          "NVMe read bandwidth per node per second, e.g. 10GB (default 10GB)")
        ->group(g)->type_name("SIZE");
    sub->add_option_function<std::string>("--nvme-write", [&f](const std::string& v) { f.nvme_write = v; },
                                          "NVMe write bandwidth per node per second, e.g. 5GB (default 5GB)")
        ->group(g)->type_name("SIZE");
    sub->add_option("--host", f.host, "Host preset: CPU cores, DRAM bandwidth, PCIe per GPU (see `zeromem hosts`)")
        ->group(g)->type_name("NAME");
    auto host_int = [&](const char* name, std::optional<int64_t>& out, const char* help) {
        sub->add_option_function<std::string>(name, [&out, name](const std::string& v) {
            try {
                out = zeromem::parse_int(v, name);
            } catch (const zeromem::InputError& e) {
                throw CLI::ValidationError(e.what());
            }
        }, help)->group(g)->type_name("N");
    };
    host_int("--host-cores", f.host_cores, "Override the host preset's CPU cores per node");
    host_int("--pcie-gen", f.pcie_gen, "Override the host preset's PCIe generation (3, 4, 5)");
    host_int("--pcie-lanes", f.pcie_lanes, "Override the host preset's PCIe lanes per GPU");
    host_int("--gpus-per-pcie-link", f.gpus_per_pcie_link, "Override the GPUs sharing one PCIe uplink to the CPU");
    sub->add_option_function<std::string>("--host-memory-bandwidth", [&f](const std::string& v) { f.host_memory_bandwidth = v; },
                                          "Override the host preset's DRAM bandwidth per node per second, e.g. 400GB")
        ->group(g)->type_name("SIZE");
}

void add_verbose_flag(CLI::App* sub, bool& verbose) {
    sub->add_flag("--verbose", verbose,
                  "Also print the notes on stderr (inputs that leave the answer unchanged, flags this subcommand does "
                  "not use, where the software stack came from); warnings are always printed")
        ->group("Output");
}

void print_diagnostics(const std::vector<std::string>& warnings, const std::vector<std::string>& notes, bool verbose) {
    std::cerr << zeromem::render_diagnostics(warnings, notes, verbose, "--verbose");
}

std::string gib(uint64_t b) { return zeromem::format_gib(double(b)); }

}  // namespace zeromem_cli
