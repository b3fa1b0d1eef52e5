// Widget tests of zeromem-gui's chart framing, capacity lines, table order, warning banner and the inputs
// both faces share, under QT_QPA_PLATFORM=offscreen (Qt Test). Oracles: the estimator/planner libraries
// called here with the same inputs (numbers converted to GiB = 2^30 bytes), and the `zeromem` binary (the
// command-line face) for the warnings it prints and the rows `compare` gives without batch flags.
#include "main_window.h"

#include "zeromem/planner.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"
#include "zeromem/speed.h"
#include "zeromem/types.h"

#include <QBarCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QGraphicsSimpleTextItem>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QProcess>
#include <QScatterSeries>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QValueAxis>
#include <QtTest>
#include <QLegendMarker>

#include <nlohmann/json.hpp>

#include <algorithm>

using namespace zeromem;
using zeromem_gui::MainWindow;
using zeromem_gui::SpeedChoice;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;
constexpr double kGiB = 1073741824.0;  // 2^30 bytes
/// The margin the speed-memory chart leaves right of max(capacity, largest fitting peak): 20 %, room for the
/// point labels and the pinned markers (qtcharts_backend.cpp kFrameMargin).
constexpr double kMargin = 1.2;

/// llama-3-70b on 16 x H100-80GB in 2 nodes (docs/gui.md's tight plan): ZeRO-0 needs several times the GPU.
Request llama70b() {
    Request r;
    r.model = "llama-3-70b";
    r.gpu = "H100-80GB";
    r.gpus = 16;
    r.nodes = 2;
    r.host_memory = "2TiB";
    r.seq_len = 2048;
    r.grad_accum = 16;
    return r;
}
const SpeedChoice kIb{"", "ib-ndr400", ""};

QChart* chart_of(MainWindow& w, const char* view) {
    auto* v = w.findChild<QChartView*>(view);
    return v ? v->chart() : nullptr;
}

template <class T>
T* series_in(QChart* c, const char* name) {
    for (QAbstractSeries* s : c->series())
        if (s->objectName() == name) return qobject_cast<T*>(s);
    return nullptr;
}

QValueAxis* x_axis(QChart* c) { return qobject_cast<QValueAxis*>(c->axes(Qt::Horizontal).value(0)); }

/// The point labels of the speed-memory chart (QGraphicsSimpleTextItems tagged "pointLabel").
QList<QGraphicsSimpleTextItem*> point_labels(QChart* c) {
    QList<QGraphicsSimpleTextItem*> out;
    for (QGraphicsItem* i : c->childItems())
        if (auto* t = qgraphicsitem_cast<QGraphicsSimpleTextItem*>(i); t && t->data(0).toString() == "pointLabel")
            out.append(t);
    return out;
}

/// The command line's stderr lines that start with `prefix` ("zeromem: warning: "), prefix removed.
QStringList cli_lines(const QStringList& args, const QString& prefix) {
    QProcess p;
    p.start(ZEROMEM_BINARY, args);
    if (!p.waitForFinished(120000)) return {"zeromem did not finish"};
    QStringList out;
    for (const QString& line : QString::fromUtf8(p.readAllStandardError()).split('\n'))
        if (line.startsWith(prefix)) out << line.mid(prefix.size());
    return out;
}

}  // namespace

class GuiChartTest : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    // The x axis frames the options that fit and the capacity line, with the stated margin; the options
    // beyond it (ZeRO-0's full replicas here) are drawn pinned at the right edge, their labels saying so.
    // The hollow series' legend keys (does not fit, off scale, selected) carry their outline colour: a
    // legend marker draws only its brush and pen, and a transparent brush alone left them blank squares.
    void hollow_series_have_visible_legend_keys() {
        MainWindow w(llama70b(), kIb, kData, false);
        QChart* c = chart_of(w, "speedMemoryChartView");
        QVERIFY(c);
        for (const char* name : {"hollow", "offscale", "selected"}) {
            auto* s = series_in<QScatterSeries>(c, name);
            QVERIFY2(s, name);
            const auto markers = c->legend()->markers(s);
            QVERIFY2(!markers.isEmpty(), name);
            QCOMPARE(markers.front()->pen().color(), s->pen().color());
            QVERIFY2(markers.front()->pen().color().alpha() > 0, name);
        }
    }

    void speed_axis_frames_the_options_that_fit() {
        MainWindow w(llama70b(), kIb, kData, false);
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        const Resolved res = resolve_request(llama70b(), kData);
        const double cap = double(*res.input.cluster.gpu_memory) / kGiB;
        double fit_max = 0, all_max = 0;
        for (const Candidate& c : w.evaluation()->rows) {
            all_max = std::max(all_max, double(c.memory.per_gpu.total) / kGiB);
            if (c.fits) fit_max = std::max(fit_max, double(c.memory.per_gpu.total) / kGiB);
        }
        const double bound = std::max(cap, fit_max) * kMargin;
        QVERIFY2(all_max > 2 * bound, "the input must have options far beyond the frame");  // ZeRO-0
        QChart* c = chart_of(w, "speedMemoryChartView");
        const double xmax = x_axis(c)->max();
        QVERIFY2(xmax <= bound * (1 + 1e-9), qPrintable(QString("axis to %1 GiB, bound %2").arg(xmax).arg(bound)));
        QVERIFY(xmax >= std::max(cap, fit_max));  // the capacity line and every fitting option are in view
        auto* off = series_in<QScatterSeries>(c, "offscale");
        QVERIFY(off);
        int beyond = 0;
        for (const Candidate& r : w.evaluation()->rows) beyond += double(r.memory.per_gpu.total) / kGiB > xmax;
        QCOMPARE(off->count(), beyond);
        QVERIFY(beyond > 0);
        for (const QPointF& p : off->points()) QVERIFY(p.x() > 0.98 * xmax && p.x() <= xmax);  // pinned at the right edge
        QStringList labels;
        for (QGraphicsSimpleTextItem* l : point_labels(c)) labels << l->text();
        QCOMPARE(int(labels.filter("off scale").size()), beyond);
        for (const Candidate& r : w.evaluation()->rows)  // an off-scale label gives the option's value
            if (double(r.memory.per_gpu.total) / kGiB > xmax)
                QVERIFY(labels.contains(QString("%1 (off scale: %2 GiB)")
                                            .arg(QString::fromStdString(zeromem_gui::short_label(r.option)))
                                            .arg(double(r.memory.per_gpu.total) / kGiB, 0, 'f', 0)));
        for (const char* name : {"fits", "tight", "hollow"})
            for (const QPointF& p : series_in<QScatterSeries>(c, name)->points()) QVERIFY(p.x() <= xmax);
    }

    // Every point label lies inside the plot area (not over the ticks, the axis title or the legend), at the
    // default size and a smaller one, for the 70B input (labels crowd at the capacity line) and a 7B one.
    void point_labels_stay_inside_the_plot_area() {
        Request small;
        small.model = "llama-2-7b";
        small.gpu = "A100-80GB";
        small.gpus = 8;
        for (const auto& [r, speed] : {std::pair{llama70b(), kIb}, std::pair{small, SpeedChoice{}}})
            for (const QSize size : {QSize(1400, 900), QSize(1100, 700)}) {
                MainWindow w(r, speed, kData, false);
                w.resize(size);
                w.show();
                QVERIFY(QTest::qWaitForWindowExposed(&w));
                QApplication::processEvents();
                QChart* c = chart_of(w, "speedMemoryChartView");
                const QRectF area = c->plotArea();
                const auto labels = point_labels(c);
                QCOMPARE(labels.size(), int(w.evaluation()->rows.size()));
                for (QGraphicsSimpleTextItem* l : labels) {
                    const QRectF box = l->mapRectToParent(l->boundingRect());
                    QVERIFY2(area.contains(box), qPrintable(QString("%1 at (%2, %3, %4 x %5) outside (%6, %7, %8 x %9)")
                                                                .arg(l->text()).arg(box.x()).arg(box.y())
                                                                .arg(box.width()).arg(box.height()).arg(area.x())
                                                                .arg(area.y()).arg(area.width()).arg(area.height())));
                }
            }
    }

    // The breakdown's per-GPU bars and the timeline carry the GPU capacity line, the host bars the usable
    // host RAM per node, at the capacities the library resolves (ClusterSettings gpu_memory, host_memory).
    void breakdown_and_timeline_draw_the_capacity_lines() {
        MainWindow w(llama70b(), kIb, kData, false);
        const Resolved res = resolve_request(llama70b(), kData);
        const double cap = double(*res.input.cluster.gpu_memory) / kGiB;
        const double host = double(*res.input.cluster.host_memory) / kGiB;
        w.tabs()->setCurrentIndex(1);  // drawn when shown
        auto* gpu_line = series_in<QLineSeries>(chart_of(w, "breakdownGpuView"), "gpuCapacity");
        auto* host_line = series_in<QLineSeries>(chart_of(w, "breakdownHostView"), "hostCapacity");
        QVERIFY(gpu_line && host_line);
        const int bars = int(w.evaluation()->rows.size());
        for (auto [line, gib] : {std::pair{gpu_line, cap}, std::pair{host_line, host}}) {
            QCOMPARE(line->count(), 2);
            for (const QPointF& p : line->points()) QVERIFY(std::abs(p.x() - gib) < 1e-9 * gib);
            QCOMPARE(line->at(0).y(), -0.5);  // across every bar of the category axis
            QCOMPARE(line->at(1).y(), bars - 0.5);
        }
        QVERIFY(x_axis(chart_of(w, "breakdownGpuView"))->max() >= cap);
        QVERIFY(x_axis(chart_of(w, "breakdownHostView"))->max() >= host);

        w.select(0);
        w.tabs()->setCurrentIndex(4);
        auto* tl = series_in<QLineSeries>(chart_of(w, "timelineChartView"), "capacity");
        QVERIFY(tl);
        QCOMPARE(tl->count(), 2);
        for (const QPointF& p : tl->points()) QVERIFY(std::abs(p.y() - cap) < 1e-9 * cap);
        auto* ty = qobject_cast<QValueAxis*>(chart_of(w, "timelineChartView")->axes(Qt::Vertical).value(0));
        QVERIFY(ty->max() >= cap);

        // No --host-memory: the host RAM is unknown and no host line is drawn.
        Request r = llama70b();
        r.host_memory.reset();
        MainWindow u(r, kIb, kData, false);
        u.tabs()->setCurrentIndex(1);
        QCOMPARE(series_in<QLineSeries>(chart_of(u, "breakdownHostView"), "hostCapacity")->count(), 0);
    }

    // The verdict columns come first (option, fits, per-GPU peak, tokens/s) and are on screen, whole, at
    // the window's default size; their numbers are the library's.
    void table_puts_the_verdict_columns_first() {
        MainWindow w(llama70b(), kIb, kData, false);
        w.resize(1400, 900);  // the default size (main_window.cpp)
        w.tabs()->setCurrentIndex(3);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTableView* t = w.table();
        const QStringList want = {"option", "fits", "per-GPU peak (GiB)", "throughput (tokens/s)"};
        for (int c = 0; c < want.size(); ++c) {
            QCOMPARE(t->model()->headerData(c, Qt::Horizontal).toString(), want[c]);
            QVERIFY2(t->columnViewportPosition(c) + t->columnWidth(c) <= t->viewport()->width(), qPrintable(want[c]));
        }
        for (int i = 0; i < t->model()->rowCount(); ++i) {
            const Candidate& c = w.evaluation()->rows[size_t(t->model()->data(t->model()->index(i, 0), Qt::UserRole + 1).toInt())];
            QCOMPARE(t->model()->data(t->model()->index(i, 2), Qt::UserRole).toDouble(), double(c.memory.per_gpu.total) / kGiB);
            QCOMPARE(t->model()->data(t->model()->index(i, 3), Qt::UserRole).toDouble(), c.time.tokens_per_s);
        }
    }

    // Every warning the command line prints for an input is in the window's banner: a DeepSpeed config with
    // "bf16": {"enabled": "auto"} and no --dtype (the fp32 fallback), and a decimal --host-memory unit.
    void warning_banner_shows_every_warning_the_cli_prints() {
        QTemporaryDir dir;
        const QString ds = dir.filePath("ds.json");
        QFile f(ds);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2},
                    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"})");
        f.close();
        Request r;
        r.model = "llama-2-7b";
        r.gpu = "A100-80GB";
        r.gpus = 8;
        r.host_memory = "1TiB";
        MainWindow w(r, {}, kData, false);
        QLabel* banner = w.findChild<QLabel*>("warningBanner");
        QVERIFY(banner);
        QVERIFY(banner->isHidden());  // nothing to warn about
        w.inputs()->ds_config->setText(ds);
        w.inputs()->host_memory->setText("1TB");
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        const QStringList cli = cli_lines({"compare", "--model", "llama-2-7b", "--gpu", "A100-80GB", "--gpus", "8",
                                           "--host-memory", "1TB", "--ds-config", ds, "--seq-len", "2048"},
                                          "zeromem: warning: ");
        QVERIFY2(cli.size() >= 2, qPrintable(cli.join('\n')));
        QVERIFY(std::any_of(cli.begin(), cli.end(), [](const QString& l) { return l.contains("DTYPE ASSUMED fp32"); }));
        QVERIFY(!banner->isHidden());
        for (const QString& l : cli) QVERIFY2(banner->text().contains(l), qPrintable(l));
        QCOMPARE(w.evaluation()->resolved.input.train.dtype, Dtype::fp32);
    }

    // --load-in and --host have fields that set the same Request fields as the command line; a Hugging Face
    // Hub id names the model in the window title (not its cached file's stem, "config").
    void load_in_host_and_hub_id_inputs() {
        Request r;
        r.model = "llama-3-70b";
        r.gpu = "RTX-4090-24GB";
        r.gpus = 2;
        r.lora_rank = 16;
        MainWindow w(r, {}, kData, false);
        QComboBox* load = w.inputs()->load_in;
        load->setCurrentIndex(load->findData(QString("4bit")));
        QCOMPARE(w.inputs()->request(r).load_in, std::optional<std::string>("4bit"));
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        Request cli = r;
        cli.load_in = "4bit";
        QCOMPARE(w.evaluation()->resolved.input.train.load_in_bits, resolve_request(cli, kData).input.train.load_in_bits);
        QCOMPARE(w.evaluation()->resolved.input.train.load_in_bits, 4);
        MainWindow from_flag(cli, {}, kData, false);  // --load-in 4bit on the GUI's command line shows in the field
        QCOMPARE(from_flag.inputs()->load_in->currentData().toString(), QString("4bit"));

        QComboBox* host = w.inputs()->host;
        host->setCurrentIndex(host->findData(QString("dgx-a100")));
        QCOMPARE(w.inputs()->speed().host, std::string("dgx-a100"));
        SpeedHardware hw = speed_hardware(*w.evaluation()->resolved.gpu, w.evaluation()->resolved.input.train.dtype, "", "", kData);
        const double before = hw.cpu_adam_rate;
        apply_host(hw, load_host_preset("dgx-a100", kData), SpeedConstants{});
        QVERIFY(w.evaluation()->hw.host.has_value());
        QCOMPARE(w.evaluation()->hw.cpu_adam_rate, hw.cpu_adam_rate);
        QCOMPARE(w.evaluation()->hw.pcie_bandwidth, hw.pcie_bandwidth);
        QVERIFY(hw.cpu_adam_rate != before);  // the preset changes the speed model

        QTemporaryDir cache;  // a Hub cache: models--ORG--NAME/{refs/main, snapshots/<commit>/config.json}
        const QString snap = cache.filePath("models--tiiuae--falcon-7b/snapshots/abc123");
        QVERIFY(QDir().mkpath(snap));
        QVERIFY(QDir().mkpath(cache.filePath("models--tiiuae--falcon-7b/refs")));
        QVERIFY(QFile::copy(QString(ZEROMEM_TEST_DATA_DIR) + "/hf_configs/falcon-7b-refinedwebmodel.json",
                            snap + "/config.json"));
        QFile ref(cache.filePath("models--tiiuae--falcon-7b/refs/main"));
        QVERIFY(ref.open(QIODevice::WriteOnly));
        ref.write("abc123\n");
        ref.close();
        qputenv("HF_HUB_CACHE", cache.path().toUtf8());
        Request hub;
        hub.hf_config = "tiiuae/falcon-7b";
        hub.gpu = "A100-80GB";
        hub.gpus = 8;
        MainWindow h(hub, {}, kData, false);
        qunsetenv("HF_HUB_CACHE");
        QVERIFY2(h.last_error().isEmpty(), qPrintable(h.last_error()));
        QVERIFY2(h.windowTitle().contains("tiiuae/falcon-7b"), qPrintable(h.windowTitle()));
        QCOMPARE(h.evaluation()->resolved.input.model.name, std::string("tiiuae/falcon-7b"));
    }

    // One rule for both faces: with no batch, sequence or host flag the window shows the library's defaults
    // and evaluates what `zeromem compare` gives for the same model and GPUs (its JSON rows).
    void defaults_are_the_command_lines() {
        Request r;
        r.model = "llama-2-7b";
        r.gpu = "A100-80GB";
        r.gpus = 8;
        MainWindow w(r, {}, kData, false);
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        QVERIFY(w.inputs()->host_memory->text().isEmpty());
        QCOMPARE(w.inputs()->micro_batch->value(), 0);  // "not given"
        QCOMPARE(w.inputs()->grad_accum->value(), 0);
        QVERIFY(!w.inputs()->request(r).micro_batch && !w.inputs()->request(r).grad_accum);
        QProcess p;
        p.start(ZEROMEM_BINARY, {"compare", "--model", "llama-2-7b", "--gpu", "A100-80GB", "--gpus", "8", "--format", "json"});
        QVERIFY(p.waitForFinished(120000));
        const auto rows = nlohmann::json::parse(p.readAllStandardOutput().toStdString());
        QCOMPARE(int(rows.size()), int(w.evaluation()->rows.size()));
        for (size_t i = 0; i < rows.size(); ++i) {
            const Candidate& c = w.evaluation()->rows[i];
            QCOMPARE(rows[i].at("option").get<std::string>(), c.option.label());
            QCOMPARE(rows[i].at("micro_batch").get<int64_t>() * rows[i].at("grad_accum").get<int64_t>() * 8,
                     w.evaluation()->global_batch);
            QCOMPARE(rows[i].at("per_gpu_total").get<uint64_t>(), c.memory.per_gpu.total);
        }
        QCOMPARE(int64_t(w.inputs()->seq_len->value()), w.evaluation()->resolved.input.train.seq_len);
    }
};

QTEST_MAIN(GuiChartTest)
#include "gui_chart_test.moc"
