// zeromem-gui: every ZeRO option of `zeromem compare` on one picture.
// Takes the same model/cluster/training flags as `zeromem compare`; with
// --screenshot PATH it renders the window offscreen to a PNG and exits.
#include "main_window.h"

#include "zeromem/request_options.h"
#include "zeromem/util.h"

#include <CLI/CLI.hpp>
#include <QApplication>
#include <QTabWidget>

#include <cstdio>

namespace {

/// The example a user sees first (the compare example of docs/compare-plan-fit.md): the command line has no
/// default model or GPU type, so the GUI picks one. Every other default (micro batch, accumulation, sequence
/// length, host RAM) is the library's (request_defaults), the same as `zeromem compare` without those flags.
void fill_example(zeromem::Request& r) {
    if (!r.model && !r.params && !r.hf_config && !r.module_tree) r.model = "llama-2-7b";
    if (!r.gpu) r.gpu = "A100-80GB";
    if (!r.gpus) r.gpus = 8;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"zeromem-gui: per-GPU memory against throughput for every ZeRO option (Qt 6)"};
    zeromem::Request req;
    zeromem_gui::SpeedChoice speed;
    std::string screenshot, tab;
    zeromem_cli::add_request_options(&app, req);
    app.add_option("--interconnect", speed.interconnect, "Intra-node interconnect preset (default: the GPU's)")
        ->type_name("NAME");
    app.add_option("--network", speed.network, "Inter-node network preset, required with --nodes > 1")->type_name("NAME");
    app.add_option("--host", speed.host, "Host preset: CPU cores, DRAM bandwidth, PCIe per GPU (see `zeromem hosts`)")
        ->type_name("NAME");
    app.add_option("--screenshot", screenshot, "Render the window offscreen to this PNG file and exit")
        ->type_name("PATH");
    app.add_option("--tab", tab, "Tab shown first: chart, breakdown, plan, table or timeline")
        ->check(CLI::IsMember({"chart", "breakdown", "plan", "table", "timeline"}));
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "zeromem-gui: %s\n", e.what());
        return 2;
    }
    if (req.from) {  // the inputs panel would keep its own fields over the file's: refused rather than half read
        std::fprintf(stderr, "zeromem-gui: --from: not taken by the GUI yet (its inputs panel has no launch file); "
                             "use zeromem estimate, compare or plan --from FILE\n");
        return 2;
    }
    fill_example(req);
    if (!screenshot.empty() && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    int qt_argc = 1;  // Qt sees only the program name: every flag is ours
    QApplication qapp(qt_argc, argv);
    QApplication::setOrganizationName("zeromem");
    QApplication::setApplicationName("zeromem-gui");
    zeromem_gui::MainWindow w(req, speed, zeromem::data_dir(), screenshot.empty());
    const QStringList tabs = {"chart", "breakdown", "plan", "table", "timeline"};
    if (!tab.empty()) w.tabs()->setCurrentIndex(int(tabs.indexOf(QString::fromStdString(tab))));
    if (screenshot.empty()) {
        w.show();
        return QApplication::exec();
    }
    if (!w.last_error().isEmpty()) {
        std::fprintf(stderr, "zeromem-gui: %s\n", w.last_error().toUtf8().constData());
        return 2;
    }
    if (!w.evaluation()->rows.empty()) w.select(0);
    w.show();
    QApplication::processEvents();
    if (!w.grab().save(QString::fromStdString(screenshot), "PNG")) {
        std::fprintf(stderr, "zeromem-gui: --screenshot: cannot write %s\n", screenshot.c_str());
        return 2;
    }
    return 0;
}
