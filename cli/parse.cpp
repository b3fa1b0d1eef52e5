// CLI11 parsing shared by zeromem and zeromem-measure (see parse.h).
#include "parse.h"

#include "zeromem/util.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace zeromem_cli {

namespace {

// The flags `sub` accepts, long and short forms.
std::vector<std::string> flag_names(const CLI::App* sub) {
    std::vector<std::string> names;
    for (const CLI::Option* o : sub->get_options()) {
        for (const auto& l : o->get_lnames()) names.push_back("--" + l);
        for (const auto& f : o->get_fnames()) names.push_back("--" + f);
    }
    return names;
}

// The names HF Trainer, accelerate, torchrun, LLaMA-Factory and DeepSpeed
// users type for an input zeromem takes, and zeromem's flag for it.
struct ForeignFlag {
    const char* typed;
    const char* ours;  // the flag (and value) zeromem takes
    const char* whose;
};
constexpr ForeignFlag kForeignFlags[] = {
    {"--bf16", "--dtype bf16", "the HF Trainer's"},
    {"--fp16", "--dtype fp16", "the HF Trainer's"},
    {"--tf32", "--dtype fp32", "the HF Trainer's"},
    {"--per_device_train_batch_size", "--micro-batch", "the HF Trainer's"},
    {"--per-device-train-batch-size", "--micro-batch", "the HF Trainer's"},
    {"--train_micro_batch_size_per_gpu", "--micro-batch", "DeepSpeed's"},
    {"--gradient_accumulation_steps", "--grad-accum", "the HF Trainer's"},
    {"--gradient-accumulation-steps", "--grad-accum", "accelerate's"},
    {"--gradient_checkpointing", "--gradient-checkpointing full", "the HF Trainer's"},
    {"--max-seq-length", "--seq-len", "TRL's"},
    {"--max_seq_length", "--seq-len", "TRL's"},
    {"--max_length", "--seq-len", "the HF Trainer's"},
    {"--model_max_length", "--seq-len", "the HF tokenizer's"},
    {"--cutoff_len", "--seq-len", "LLaMA-Factory's"},
    {"--zero", "--stage", "another tool's"},
    {"--zero_stage", "--stage", "accelerate's"},
    {"--zero-stage", "--stage", "accelerate's"},
    {"--deepspeed", "--ds-config", "the HF Trainer's"},
    {"--model_name_or_path", "--model (a preset) or --hf-config (a config.json)", "the HF Trainer's"},
    {"--num_gpus", "--gpus", "the deepspeed launcher's"},
    {"--nproc_per_node", "--gpus (per node, with --nodes)", "torchrun's"},
    {"--num_processes", "--gpus", "accelerate's"},
    {"--num_nodes", "--nodes", "the deepspeed launcher's"},
    {"--nnodes", "--nodes", "torchrun's"},
};

// "(--bf16 is the HF Trainer's; here: --dtype bf16)" when `typed` is a flag
// of another tool whose zeromem flag `sub` takes; empty otherwise.
std::string foreign_flag_hint(const std::string& typed, const std::vector<std::string>& names) {
    for (const auto& f : kForeignFlags) {
        if (typed != f.typed) continue;
        std::string ours = f.ours;
        const std::string flag = ours.substr(0, ours.find(' '));
        if (std::find(names.begin(), names.end(), flag) == names.end()) return {};
        return " (" + typed + " is " + f.whose + " flag; zeromem's is " + ours + ")";
    }
    return {};
}

// "unknown option --gpu-mem (did you mean --gpu-memory?)" for the first
// argument `sub` does not take; empty when every flag is known.
std::string unknown_flag_message(const CLI::App* sub, int argc, char** argv) {
    const auto names = flag_names(sub);
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--", 0) != 0) continue;
        if (const auto eq = a.find('='); eq != std::string::npos) a.resize(eq);
        if (std::find(names.begin(), names.end(), a) != names.end()) continue;
        std::string msg = "unknown option '" + a + "' for " + sub->get_name();
        if (const std::string hint = foreign_flag_hint(a, names); !hint.empty())
            return msg + hint + "; see zeromem " + sub->get_name() + " --help";
        std::vector<std::string> close;  // flags that start with what was typed, else the nearest
        for (const auto& n : names)
            if (n.rfind(a, 0) == 0 && close.size() < 2) close.push_back(n);
        if (close.empty()) close = zeromem::closest_names(a, names, 2);
        if (!close.empty()) {
            msg += " (did you mean ";
            for (std::size_t k = 0; k < close.size(); ++k) msg += (k ? " or " : "") + close[k];
            msg += "?)";
        }
        return msg + "; see zeromem " + sub->get_name() + " --help";
    }
    return {};
}

// `--gradient-checkpointing` with no mode after it is the HF Trainer's
// boolean --gradient_checkpointing: mode full.
std::vector<char*> with_checkpointing_mode(int argc, char** argv) {
    static char full[] = "full";
    std::vector<char*> out(argv, argv + argc);
    for (std::size_t i = 1; i < out.size(); ++i)
        if (std::string(out[i]) == "--gradient-checkpointing" &&
            (i + 1 == out.size() || std::string(out[i + 1]).rfind("-", 0) == 0))
            out.insert(out.begin() + static_cast<std::ptrdiff_t>(i) + 1, full);
    return out;
}

}  // namespace

// A parse error is one line and exit status 2, like every other input error.
std::optional<int> parse_command_line(CLI::App& app, int argc_given, char** argv_given) {
    std::vector<char*> args = with_checkpointing_mode(argc_given, argv_given);
    const int argc = static_cast<int>(args.size());
    char** argv = args.data();
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::string msg = e.what();
        if (const auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
        for (const auto* s : app.get_subcommands())
            if (const std::string u = unknown_flag_message(s, argc, argv); !u.empty()) {
                std::cerr << "zeromem: error: " << u << "\n";
                return 2;
            }
        const auto subs = app.get_subcommands();
        std::cerr << "zeromem: error: " << msg << " (see zeromem "
                  << (subs.empty() ? std::string() : subs.front()->get_name() + " ") << "--help)\n";
        return 2;
    }
    return std::nullopt;
}

}  // namespace zeromem_cli
