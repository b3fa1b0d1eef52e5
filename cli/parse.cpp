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

}  // namespace

// A parse error is one line and exit status 2, like every other input error.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
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
