// Widget tests of zeromem-gui under QT_QPA_PLATFORM=offscreen (Qt Test).
// Oracles: the estimator/planner libraries called here directly with the
// same inputs (the GUI must show their numbers, converted to GiB = 2^30
// bytes), published GPU capacities (A100 40/80 GB, L40S 48 GB), the PNG
// signature (PNG spec, section 5.2), the `zeromem estimate` binary for
// the exported DeepSpeed config, and zeromem::sim::simulate (called here with
// the selected option applied) for the timeline tab.
#include "main_window.h"
#include "timeline.h"

#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"
#include "zeromem/speed.h"
#include "zeromem/types.h"

#include <QAbstractBarSeries>
#include <QAreaSeries>
#include <QLabel>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFile>
#include <QLineEdit>
#include <QLineSeries>
#include <QListWidget>
#include <QProcess>
#include <QScatterSeries>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QToolTip>
#include <QValueAxis>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

using namespace zeromem;
using zeromem_gui::MainWindow;
using zeromem_gui::SpeedChoice;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;
constexpr double kGiB = 1073741824.0;  // 2^30 bytes

Request default_request() {
    Request r;
    r.model = "llama-2-7b";
    r.gpu = "A100-80GB";
    r.gpus = 8;
    r.host_memory = "1TB";
    r.seq_len = 4096;
    r.grad_accum = 8;
    return r;
}

/// What the library gives for `r`: compare_options with the global batch
/// micro x accumulation x GPUs (DeepSpeed's train_batch_size identity).
std::vector<Candidate> library_rows(const Request& r) {
    Resolved res = resolve_request(r, kData);
    sim::use_replayed_fragmentation(res.input, r.fragmentation.has_value());  // as the GUI (scenario.cpp) does
    const SpeedHardware hw = speed_hardware(*res.gpu, res.input.train.dtype, "", "", kData);
    const int64_t global = r.micro_batch.value_or(1) * r.grad_accum.value_or(1) * r.gpus.value_or(1);
    return compare_options(res.input, hw, global);
}

QChart* speed_chart(MainWindow& w) {
    auto* view = w.findChild<QChartView*>("speedMemoryChartView");
    return view ? view->chart() : nullptr;
}

template <class T>
T* series(MainWindow& w, const char* name) {
    for (QAbstractSeries* s : speed_chart(w)->series())
        if (s->objectName() == name) return qobject_cast<T*>(s);
    return nullptr;
}

/// (x GiB, y tokens/s) of the library rows with the given fits flag, sorted; with `fits`, those whose
/// Candidate::tight is `tight` (the "fits" series holds the rows that fit with the margin, "tight" the rest).
QList<QPointF> expected_points(const std::vector<Candidate>& rows, bool fits, bool tight = false) {
    QList<QPointF> out;
    for (const auto& c : rows)
        if (c.fits == fits && (!fits || c.tight == tight))
            out.append(QPointF(double(c.memory.per_gpu.total) / kGiB, c.time.tokens_per_s));
    std::sort(out.begin(), out.end(), [](const QPointF& a, const QPointF& b) { return a.x() < b.x() || (a.x() == b.x() && a.y() < b.y()); });
    return out;
}

QChart* timeline_chart(MainWindow& w) {
    auto* view = w.findChild<QChartView*>("timelineChartView");
    return view ? view->chart() : nullptr;
}

template <class T>
T* timeline_series(MainWindow& w, const char* name) {
    for (QAbstractSeries* s : timeline_chart(w)->series())
        if (s->objectName() == name) return qobject_cast<T*>(s);
    return nullptr;
}

double max_y(const QList<QPointF>& pts) {
    double m = -1;
    for (const QPointF& p : pts) m = std::max(m, p.y());
    return m;
}

/// What simulate() gives for row `row` of the window's evaluation (the option applied as the planner does).
sim::SimResult library_timeline(const MainWindow& w, int row) {
    EstimateInput in = w.evaluation()->resolved.input;
    apply_candidate(w.evaluation()->rows[size_t(row)], in);
    return sim::simulate(in, sim::SimOptions{});
}

QList<QPointF> sorted(QList<QPointF> p) {
    std::sort(p.begin(), p.end(), [](const QPointF& a, const QPointF& b) { return a.x() < b.x() || (a.x() == b.x() && a.y() < b.y()); });
    return p;
}

bool same_points(const QList<QPointF>& a, const QList<QPointF>& b) {
    if (a.size() != b.size()) return false;
    for (int i = 0; i < a.size(); ++i)
        if (std::abs(a[i].x() - b[i].x()) > 1e-9 * std::max(1.0, b[i].x()) ||
            std::abs(a[i].y() - b[i].y()) > 1e-9 * std::max(1.0, b[i].y()))
            return false;
    return true;
}

/// The options that do not fit, as drawn: those within the x axis as hollow points at their values, those
/// beyond it in the "offscale" series pinned just inside the axis maximum, at their throughput.
bool non_fitting_drawn(MainWindow& w, const std::vector<Candidate>& rows) {
    const double xmax = qobject_cast<QValueAxis*>(speed_chart(w)->axes(Qt::Horizontal).value(0))->max();
    QList<QPointF> in;
    QList<double> off_y, drawn_y;
    for (const QPointF& p : expected_points(rows, false)) p.x() > xmax ? off_y.append(p.y()) : in.append(p);
    for (const QPointF& p : series<QScatterSeries>(w, "offscale")->points()) {
        if (p.x() <= 0.98 * xmax || p.x() > xmax) return false;
        drawn_y.append(p.y());
    }
    std::sort(off_y.begin(), off_y.end());
    std::sort(drawn_y.begin(), drawn_y.end());
    return same_points(sorted(series<QScatterSeries>(w, "hollow")->points()), sorted(in)) && off_y == drawn_y;
}

/// Splits one CSV line (fields may be quoted with "").
QStringList csv_split(const QString& line) {
    QStringList out;
    QString cur;
    bool quoted = false;
    for (int i = 0; i < line.size(); ++i) {
        const QChar ch = line[i];
        if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            cur += '"';
            ++i;
        } else if (ch == '"') {
            quoted = !quoted;
        } else if (ch == ',' && !quoted) {
            out << cur;
            cur.clear();
        } else {
            cur += ch;
        }
    }
    out << cur;
    return out;
}

}  // namespace

class GuiTest : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void series_equal_library_and_follow_inputs() {
        Request r = default_request();
        MainWindow w(r, {}, kData, false);
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        auto rows = library_rows(r);
        const int options = int(stage_offload_options().size());
        QCOMPARE(int(rows.size()), 2 * options);  // every stage/offload option x {no, full} checkpointing
        auto* fits = series<QScatterSeries>(w, "fits");
        auto* tight = series<QScatterSeries>(w, "tight");
        auto* hollow = series<QScatterSeries>(w, "hollow");
        auto* off = series<QScatterSeries>(w, "offscale");
        QVERIFY(fits && tight && hollow && off);
        QCOMPARE(fits->count() + tight->count() + hollow->count() + off->count(), 2 * options);
        QVERIFY(same_points(sorted(fits->points()), expected_points(rows, true)));
        QVERIFY(non_fitting_drawn(w, rows));
        const QList<QPointF> before = sorted(fits->points());

        w.inputs()->gpus->setValue(16);  // one input change: recomputed at once
        r.gpus = 16;
        rows = library_rows(r);
        QCOMPARE(fits->count() + tight->count() + hollow->count() + off->count(), int(rows.size()));
        QVERIFY(same_points(sorted(fits->points()), expected_points(rows, true)));
        QVERIFY(non_fitting_drawn(w, rows));
        QVERIFY(!same_points(sorted(fits->points()), before));

        w.inputs()->checkpointing->setCurrentIndex(w.inputs()->checkpointing->findData(QString("full")));
        QCOMPARE(fits->count() + tight->count() + hollow->count() + off->count(), options);  // only the full-checkpointing rows
        for (const QPointF& p : fits->points() + tight->points() + hollow->points()) {
            bool found = false;
            for (const auto& c : rows)
                found = found || (c.option.checkpointing == Checkpointing::full &&
                                  std::abs(double(c.memory.per_gpu.total) / kGiB - p.x()) < 1e-9 &&
                                  std::abs(c.time.tokens_per_s - p.y()) < 1e-6);
            QVERIFY(found);
        }
    }

    void capacity_line_moves_with_gpu() {
        MainWindow w(default_request(), {}, kData, false);
        auto* cap = series<QLineSeries>(w, "capacity");
        QVERIFY(cap);
        QCOMPARE(cap->count(), 2);
        // A100-80GB: 79.14 GiB, the total the device reports (data/gpus/A100-80GB.json usable_source: a
        // CUDA OOM message, torch prints 2 decimals); A100-40GB: 39.50 GiB likewise.
        QVERIFY(std::abs(cap->at(0).x() - 79.14) < 0.005);
        QVERIFY(std::abs(cap->at(1).x() - 79.14) < 0.005);
        QComboBox* gpu = w.inputs()->gpu;
        gpu->setCurrentIndex(gpu->findText("A100-40GB"));
        QVERIFY(std::abs(cap->at(0).x() - 39.50) < 0.005);
        gpu->setCurrentIndex(gpu->findText("L40S-48GB"));
        QVERIFY(std::abs(cap->at(0).x() - 46068.0 / 1024.0) < 1e-6);  // L40S: nvidia-smi's 46068 MiB total
    }

    void non_fitting_points_are_hollow_and_change_with_gpu() {
        Request r = default_request();
        r.model = "llama-2-70b";
        r.gpu = "A100-40GB";
        MainWindow w(r, {}, kData, false);
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        auto* fits = series<QScatterSeries>(w, "fits");
        auto* hollow = series<QScatterSeries>(w, "hollow");
        auto rows = library_rows(r);
        const QList<QPointF> out40 = expected_points(rows, false);
        QVERIFY(!out40.isEmpty());
        QVERIFY(non_fitting_drawn(w, rows));
        QVERIFY(same_points(sorted(fits->points()), expected_points(rows, true)));
        QCOMPARE(hollow->brush().color().alpha(), 0);  // hollow: no fill
        QVERIFY(hollow->pen().width() >= 1);
        QCOMPARE(fits->brush().color().alpha(), 255);  // filled

        w.inputs()->gpu->setCurrentIndex(w.inputs()->gpu->findText("H200-141GB"));
        r.gpu = "H200-141GB";
        rows = library_rows(r);
        const QList<QPointF> out141 = expected_points(rows, false);
        QVERIFY(out141.size() < out40.size());  // more options fit in 141 GiB than in 40 GiB
        QVERIFY(non_fitting_drawn(w, rows));
        QVERIFY(same_points(sorted(fits->points()), expected_points(rows, true)));
    }

    void hollow_and_filled_points_render_differently() {
        // A GPU on which an option that does not fit lies within the x axis (not pinned at its edge).
        Request r = default_request();
        for (const char* gpu : {"A100-80GB", "A100-40GB", "L40S-48GB", "H100-80GB"}) {
            r.gpu = gpu;
            MainWindow probe(r, {}, kData, false);
            if (series<QScatterSeries>(probe, "hollow")->count() > 0) break;
        }
        MainWindow w(r, {}, kData, false);
        w.resize(1400, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* view = w.findChild<QChartView*>("speedMemoryChartView");
        auto* fits = series<QScatterSeries>(w, "fits");
        auto* hollow = series<QScatterSeries>(w, "hollow");
        QVERIFY(fits->count() > 0 && hollow->count() > 0);
        const QImage img = w.chart()->image();
        auto centre = [&](const QPointF& v) {
            return img.pixelColor(view->mapFromScene(view->chart()->mapToPosition(v, fits)));
        };
        // A hollow marker's centre shows the white plot background; a filled one is the fill colour.
        const QColor h = centre(hollow->at(0));
        QVERIFY2(h.red() > 230 && h.green() > 230 && h.blue() > 230, qPrintable(h.name()));
        // The filled marker read is one no other marker overlaps (points can lie side by side).
        auto pixel = [&](const QPointF& v) { return view->mapFromScene(view->chart()->mapToPosition(v, fits)); };
        QList<QPoint> all;
        for (QAbstractSeries* sr : speed_chart(w)->series())
            if (auto* sc = qobject_cast<QScatterSeries*>(sr))
                for (const QPointF& v : sc->points()) all.push_back(pixel(v));
        int alone = -1;
        for (int i = 0; i < fits->count() && alone < 0; ++i) {
            const QPoint c = pixel(fits->at(i));
            int near = 0;
            for (const QPoint& o : all)
                if ((o - c).manhattanLength() < 2 * int(fits->markerSize())) ++near;
            if (near == 1) alone = i;  // itself only
        }
        QVERIFY2(alone >= 0, "every filled marker overlaps another");
        // Most of the pixels around its centre are the fill colour (a label's leader line may cross it).
        const QPoint c = pixel(fits->at(alone));
        int filled = 0, seen = 0;
        for (int dy = -2; dy <= 2; ++dy)
            for (int dx = -2; dx <= 2; ++dx, ++seen)
                if (img.pixelColor(c + QPoint(dx, dy)).name() == fits->color().name()) ++filled;
        QVERIFY2(2 * filled > seen, qPrintable(centre(fits->at(alone)).name()));
    }

    void bad_input_shows_message_and_keeps_picture() {
        MainWindow w(default_request(), {}, kData, false);
        auto* fits = series<QScatterSeries>(w, "fits");
        const QList<QPointF> good = fits->points();
        const int good_rows = w.table()->model()->rowCount();

        Request bad = default_request();
        bad.nodes = 3;
        QString expected;
        try {
            resolve_request(bad, kData);
        } catch (const InputError& e) {
            expected = e.what();
        }
        QVERIFY(expected.startsWith("--nodes"));
        w.inputs()->nodes->setValue(3);  // 3 nodes do not divide 8 GPUs
        QCOMPARE(w.last_error(), expected);
        QCOMPARE(w.inputs()->error_text("--nodes"), expected);
        QCOMPARE(fits->points(), good);
        QCOMPARE(w.table()->model()->rowCount(), good_rows);

        w.inputs()->nodes->setValue(1);
        QVERIFY(w.last_error().isEmpty());
        QVERIFY(w.inputs()->error_text("--nodes").isEmpty());

        w.inputs()->params->setText("-5");  // typing a parameter count makes --params the model source
        QCOMPARE(w.inputs()->model_source->currentIndex(), 1);
        QVERIFY(w.last_error().startsWith("--params"));
        QCOMPARE(w.inputs()->error_text("--params"), w.last_error());
        QCOMPARE(fits->points(), good);
        w.inputs()->params->setText("7e9");
        QVERIFY(w.last_error().isEmpty());
        QVERIFY(fits->points() != good);  // a 7e9-parameter model without architecture: other numbers
    }

    void exports_write_valid_files() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        MainWindow w(default_request(), {}, kData, false);
        w.resize(1200, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));

        const QString png = dir.filePath("chart.png");
        QCOMPARE(w.export_chart_png(png), QString());
        QFile f(png);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.read(8), QByteArray("\x89PNG\r\n\x1a\n", 8));
        f.close();
        QImage img(png);
        QCOMPARE(img.size(), w.chart()->widget()->size());
        QVERIFY(img.width() > 300 && img.height() > 200);

        const QString csv = dir.filePath("table.csv");
        QCOMPARE(w.export_table_csv(csv), QString());
        QFile c(csv);
        QVERIFY(c.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList lines = QString::fromUtf8(c.readAll()).split('\n', Qt::SkipEmptyParts);
        const auto rows = library_rows(default_request());
        QCOMPARE(lines.size(), 1 + int(rows.size()));
        QVERIFY(lines[0].contains("GiB") && lines[0].contains("tokens/s"));
        QStringList labels, expected_labels;
        for (int i = 1; i < lines.size(); ++i) {
            const QStringList cells = csv_split(lines[i]);
            QCOMPARE(cells.size(), 11);
            labels << cells[0];
            // The numbers are the library's: per-GPU peak in GiB, tokens/s.
            const auto it = std::find_if(rows.begin(), rows.end(), [&](const Candidate& row) {
                return QString::fromStdString(row.option.label()) == cells[0];
            });
            QVERIFY(it != rows.end());
            QVERIFY(std::abs(cells[2].toDouble() - double(it->memory.per_gpu.total) / kGiB) < 1e-9 * cells[2].toDouble());
            QVERIFY(std::abs(cells[3].toDouble() - it->time.tokens_per_s) < 1e-9 * it->time.tokens_per_s);
            QCOMPARE(cells[1], QString(!it->fits ? "no" : it->tight ? "tight" : "yes"));
        }
        for (const auto& r : rows) expected_labels << QString::fromStdString(r.option.label());
        labels.sort();
        expected_labels.sort();
        QCOMPARE(labels, expected_labels);

        const QString ds = dir.filePath("ds.json");
        QVERIFY(!w.export_ds_config(ds).isEmpty());  // nothing selected yet
        w.select(0);
        QCOMPARE(w.export_ds_config(ds), QString());
        QFile dj(ds);
        QVERIFY(dj.open(QIODevice::ReadOnly));
        const auto cfg = nlohmann::json::parse(dj.readAll().toStdString());
        QCOMPARE(cfg.at("zero_optimization").at("stage").get<int>(), w.evaluation()->rows[0].option.stage);
        QProcess p;
        p.start(ZEROMEM_BINARY, {"estimate", "--ds-config", ds, "--model", "llama-2-7b", "--gpus", "8", "--gpu",
                                 "A100-80GB", "--seq-len", "4096"});
        QVERIFY(p.waitForFinished(30000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    }

    void click_selects_point_and_table_row() {
        MainWindow w(default_request(), {}, kData, false);
        w.resize(1400, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* view = w.findChild<QChartView*>("speedMemoryChartView");
        auto* fits = series<QScatterSeries>(w, "fits");
        QVERIFY(fits->count() > 0);
        // The point farthest (on screen) from its nearest neighbour, so the click is unambiguous.
        auto screen = [&](const QPointF& v) { return view->mapFromScene(view->chart()->mapToPosition(v, fits)); };
        const QList<QPointF> all =
            fits->points() + series<QScatterSeries>(w, "hollow")->points() + series<QScatterSeries>(w, "offscale")->points();
        QPointF value;
        double best = -1;
        for (const QPointF& p : fits->points()) {
            double nearest = 1e9;
            for (const QPointF& q : all)
                if (q != p) nearest = std::min(nearest, double(QLineF(screen(p), screen(q)).length()));
            if (nearest > best) {
                best = nearest;
                value = p;
            }
        }
        QVERIFY(best > 4);
        const QPoint at = screen(value);
        QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, at);
        QVERIFY(w.selected() >= 0);
        const Candidate& c = w.evaluation()->rows[size_t(w.selected())];
        QCOMPARE(double(c.memory.per_gpu.total) / kGiB, value.x());
        QCOMPARE(c.time.tokens_per_s, value.y());
        auto* ring = series<QScatterSeries>(w, "selected");
        QCOMPARE(ring->count(), 1);
        QCOMPARE(ring->at(0), value);
        // Hovering shows the option's numbers with units (the signal Qt Charts emits on hover;
        // synthetic mouse moves are flaky offscreen, Qt's own chart tests skip them).
        emit fits->hovered(value, true);
        QTRY_VERIFY(QToolTip::isVisible());
        QVERIFY(QToolTip::text().contains(QString::fromStdString(c.option.label())));
        QVERIFY(QToolTip::text().contains(QString::number(c.time.tokens_per_s, 'f', 0) + " tokens/s"));
        QVERIFY(QToolTip::text().contains(QString::number(double(c.memory.per_gpu.total) / kGiB, 'f', 2) + " GiB"));
        emit fits->hovered(value, false);
        const QModelIndex cur = w.table()->selectionModel()->currentIndex();
        QVERIFY(cur.isValid());
        QCOMPARE(w.table()->model()->data(w.table()->model()->index(cur.row(), 0)).toString(),
                 QString::fromStdString(c.option.label()));
    }

    void table_sorts_and_plan_and_breakdown_show_library_numbers() {
        const Request r = default_request();
        MainWindow w(r, {}, kData, false);
        QTableView* t = w.table();
        t->sortByColumn(3, Qt::DescendingOrder);  // throughput (tokens/s)
        for (int i = 1; i < t->model()->rowCount(); ++i)
            QVERIFY(t->model()->data(t->model()->index(i - 1, 3), Qt::UserRole).toDouble() >=
                    t->model()->data(t->model()->index(i, 3), Qt::UserRole).toDouble());

        const Resolved res = resolve_request(r, kData);
        const SpeedHardware hw = speed_hardware(*res.gpu, res.input.train.dtype, "", "", kData);
        const PlanResult pr = plan(res.input, hw, 1 * 8 * 8);
        QCOMPARE(w.plan_table()->rowCount(), int(pr.steps.size()));
        QCOMPARE(w.plan_table()->item(0, 0)->text().toInt(), pr.steps[0].recipe_step);

        w.tabs()->setCurrentIndex(1);  // the breakdown is drawn when its tab is shown
        auto* gpu_view = w.findChild<QChartView*>("breakdownGpuView");
        QVERIFY(gpu_view);
        // First drawing, an in-place update after an input change, then fewer bars (full checkpointing only).
        for (int step = 0; step < 3; ++step) {
            if (step == 1) w.inputs()->gpus->setValue(2);
            if (step == 2) w.inputs()->checkpointing->setCurrentIndex(w.inputs()->checkpointing->findData(QString("full")));
            auto* stack = qobject_cast<QAbstractBarSeries*>(gpu_view->chart()->series().value(0));
            QVERIFY(stack);
            QCOMPARE(stack->count(), 7);  // parameters ... fragmentation
            const auto rows = w.evaluation()->rows;
            const int n = int(rows.size());
            QCOMPARE(stack->barSets()[0]->count(), n);
            QCOMPARE(n, int(stage_offload_options().size()) * (step == 2 ? 1 : 2));
            for (int b = 0; b < n; ++b) {  // bars are drawn bottom-up: the last row first
                double sum = 0;
                for (QBarSet* set : stack->barSets()) sum += set->at(n - 1 - b);
                // The seven components of the peak phase add up to the per-GPU peak.
                QVERIFY(std::abs(sum - double(rows[size_t(b)].memory.per_gpu.total) / kGiB) < 1e-6);
            }
        }
    }

    void window_size_is_remembered() {
        QCoreApplication::setOrganizationName("zeromem-test");
        QCoreApplication::setApplicationName("zeromem-gui-test");
        QSettings().clear();
        {
            MainWindow w(default_request(), {}, kData, true);
            QCOMPARE(w.size(), QSize(1400, 900));  // the default size
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            w.resize(1111, 777);
            w.close();
        }
        MainWindow again(default_request(), {}, kData, true);
        QCOMPARE(again.size(), QSize(1111, 777));
        QSettings().clear();
    }

    void ordering_path_joins_each_groups_fastest_fitting_option() {
        const Request r = default_request();
        MainWindow w(r, {}, kData, false);
        const auto rows = library_rows(r);
        QList<QPointF> expected;
        for (const OrderingGroup& g : ordering_groups(rows))
            if (g.row >= 0)
                expected.append(QPointF(double(rows[size_t(g.row)].memory.per_gpu.total) / kGiB,
                                        rows[size_t(g.row)].time.tokens_per_s));
        QVERIFY(expected.size() >= 2);
        auto* path = series<QLineSeries>(w, "ordering");
        QVERIFY(path);
        QVERIFY(same_points(path->points(), expected));  // in the recipe's order, not sorted
    }

    void unknown_model_preset_is_named_by_the_library() {
        Request r = default_request();
        r.model = "llama-9-7b";
        MainWindow w(r, {}, kData, false);
        QString expected;
        try {
            resolve_request(r, kData);
        } catch (const InputError& e) {
            expected = e.what();
        }
        QVERIFY(expected.startsWith("--model"));
        QCOMPARE(w.last_error(), expected);
        QCOMPARE(w.inputs()->error_text("--model"), expected);
        QVERIFY(!w.evaluation());  // no good input yet: nothing drawn
    }

    void model_from_hf_config_and_ds_config_inputs() {
        MainWindow w(default_request(), {}, kData, false);
        const QString hf = QString(ZEROMEM_TEST_DATA_DIR) + "/hf_configs/falcon-7b-refinedwebmodel.json";
        w.inputs()->hf_config->setText(hf);
        w.inputs()->model_source->setCurrentIndex(2);
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        QCOMPARE(w.evaluation()->resolved.input.model.params, count_params(load_hf_config(hf.toStdString())).total);
        w.inputs()->hf_config->setText(hf + ".missing");
        QVERIFY(w.last_error().startsWith("--hf-config"));
        QCOMPARE(w.inputs()->error_text("--hf-config"), w.last_error());

        w.inputs()->model_source->setCurrentIndex(0);
        QVERIFY(w.last_error().isEmpty());
        w.inputs()->ds_config->setText(QString::fromStdString(kData) + "/ds_configs/ds_zero3_config.json");
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        QCOMPARE(w.evaluation()->resolved.input.zero.stage, 3);  // the config's zero_optimization.stage
        w.inputs()->ds_config->setText("/nonexistent/ds.json");
        QVERIFY(w.last_error().startsWith("--ds-config"));
        QCOMPARE(w.inputs()->error_text("--ds-config"), w.last_error());
    }

    // --module-tree as a model source: the tree's counts (tiny_llama.json, tests/module_tree_test.cpp: h 8,
    // f 16, V 32, one layer, untied head), its config.json for the activations, and errors beside the field.
    void model_from_module_tree() {
        const QString tree = QString(ZEROMEM_TEST_DATA_DIR) + "/module_trees/tiny_llama.json";
        Request r = default_request();
        r.model.reset();
        r.module_tree = tree.toStdString();
        MainWindow w(r, {}, kData, false);
        QCOMPARE(w.inputs()->model_source->currentIndex(), 3);
        QCOMPARE(w.inputs()->module_tree->text(), tree);
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        const uint64_t h = 8, f = 16, V = 32;
        const uint64_t total = V * h + (4 * h * h + 3 * h * f + 2 * h) + h + V * h;
        QCOMPARE(w.evaluation()->resolved.input.model.params, total);
        QVERIFY(w.evaluation()->resolved.input.model.arch.has_value());  // the config.json the tree carries
        QCOMPARE(w.evaluation()->resolved.input.model.largest_layer_params, V * h);
        w.inputs()->module_tree->setText(tree + ".missing");
        QVERIFY(w.last_error().startsWith("--module-tree"));
        QCOMPARE(w.inputs()->error_text("--module-tree"), w.last_error());
        w.inputs()->model_source->setCurrentIndex(0);  // back to a preset: the tree is not used
        w.inputs()->presets->setCurrentItem(w.inputs()->presets->findItems("llama-2-7b", Qt::MatchFixedString).front());
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        QCOMPARE(w.evaluation()->resolved.input.model.name, std::string("llama-2-7b"));
    }

    void inputs_are_keyboard_reachable() {
        MainWindow w(default_request(), {}, kData, false);
        const QList<QWidget*> fields = {w.inputs()->model_source, w.inputs()->preset_search, w.inputs()->presets,
                                        w.inputs()->gpu, w.inputs()->gpus, w.inputs()->nodes,
                                        w.inputs()->host_memory, w.inputs()->dtype, w.inputs()->micro_batch,
                                        w.inputs()->seq_len, w.inputs()->grad_accum, w.inputs()->checkpointing,
                                        w.inputs()->lora_rank, w.inputs()->trainable, w.inputs()->ds_config,
                                        w.chart()->widget(), w.table()};
        for (QWidget* f : fields) QVERIFY(f->focusPolicy() & Qt::TabFocus);
        // Tab moves from the GPU type to the GPU count, and the arrow keys change it.
        w.show();
        QApplication::setActiveWindow(&w);
        QVERIFY(QTest::qWaitForWindowActive(&w));
        w.inputs()->gpu->setFocus();
        QTest::keyClick(w.inputs()->gpu, Qt::Key_Tab);
        QWidget* focus = QApplication::focusWidget();
        QVERIFY2(focus == w.inputs()->gpus || (focus && focus->parentWidget() == w.inputs()->gpus),
                 focus ? focus->metaObject()->className() : "no focus");
        QTest::keyClick(focus, Qt::Key_Up);
        QCOMPARE(w.inputs()->gpus->value(), 9);
        QCOMPARE(w.evaluation()->resolved.input.cluster.gpus, int64_t(9));
    }

    void timeline_peaks_equal_simulator_and_bands_follow_phases() {
        MainWindow w(default_request(), {}, kData, false);
        w.tabs()->setCurrentWidget(w.timeline()->widget());
        auto* msg = w.findChild<QLabel*>("timelineMessage");
        QVERIFY(msg);
        QVERIFY(msg->text().contains("Select an option"));  // nothing selected yet
        // Row 0 (the fastest fitting option) and the last fitting row (a slower stage/offload choice).
        int last_fit = 0;
        for (size_t i = 0; i < w.evaluation()->rows.size(); ++i)
            if (w.evaluation()->rows[i].fits) last_fit = int(i);
        QVERIFY(last_fit > 0);
        for (int row : {0, last_fit}) {
            w.select(row);
            const sim::SimResult r = library_timeline(w, row);
            QVERIFY(!r.timeline.empty());
            QVERIFY(r.timeline.size() > 1000);  // enough events for decimation to matter below
            auto* allocated = timeline_series<QLineSeries>(w, "allocated");
            auto* reserved = timeline_series<QLineSeries>(w, "reserved");
            auto* peak = timeline_series<QScatterSeries>(w, "peakAllocated");
            QVERIFY(allocated && reserved && peak);
            QVERIFY(allocated->count() <= zeromem_gui::kTimelineMaxPoints);
            QCOMPARE(max_y(allocated->points()), double(r.peak_allocated) / kGiB);
            QCOMPARE(max_y(reserved->points()), double(r.peak_reserved) / kGiB);
            QCOMPARE(peak->count(), 1);
            QCOMPARE(peak->at(0), QPointF(double(r.peak_allocated_t), double(r.peak_allocated) / kGiB));
            const QString label = peak->pointLabelsFormat();  // drawn beside the point
            QVERIFY2(label.contains(QString::fromStdString(r.peak_event)), qPrintable(label));
            QVERIFY2(label.contains(QString::fromStdString(r.peak_module)), qPrintable(label));
            QVERIFY(peak->pointLabelsVisible());
            // Runs of equal consecutive phases, counted from the simulator's rows here.
            int runs = 0;
            QStringList names;
            for (size_t i = 0; i < r.timeline.size(); ++i)
                if (i == 0 || r.timeline[i].phase != r.timeline[i - 1].phase) {
                    ++runs;
                    names << QString("phase:") + sim::to_string(r.timeline[i].phase);
                }
            QStringList bands;
            for (QAbstractSeries* s : timeline_chart(w)->series())
                if (s->objectName().startsWith("phase:")) {
                    QVERIFY(qobject_cast<QAreaSeries*>(s));
                    bands << s->objectName();
                }
            QCOMPARE(bands.size(), runs);
            QCOMPARE(bands, names);  // in event order
            QVERIFY(runs >= 4);      // load, forward, backward, optimizer_step at least
        }
    }

    void timeline_of_an_option_that_does_not_fit_stops_at_the_simulators_oom() {
        MainWindow w(default_request(), {}, kData, false);  // ZeRO-0 does not fit 80 GiB for llama-2-7b
        w.tabs()->setCurrentWidget(w.timeline()->widget());
        int row = -1;
        for (size_t i = 0; i < w.evaluation()->rows.size(); ++i)
            if (!w.evaluation()->rows[i].fits && w.evaluation()->rows[i].option.stage == 0) row = int(i);
        QVERIFY(row >= 0);
        w.select(row);
        const sim::SimResult r = library_timeline(w, row);
        QVERIFY(r.oom);  // the simulator's allocator also runs out of the 80 GiB (minus the CUDA context)
        auto* msg = w.findChild<QLabel*>("timelineMessage");
        QVERIFY2(msg->text().contains(QString("Out of memory at event %1").arg(qulonglong(r.oom->t))), qPrintable(msg->text()));
        QVERIFY(msg->text().contains(QString::fromStdString(r.oom->term)));
        auto* allocated = timeline_series<QLineSeries>(w, "allocated");
        QVERIFY(allocated);
        QCOMPARE(max_y(allocated->points()), double(r.peak_allocated) / kGiB);
        QCOMPARE(allocated->points().back().x(), double(r.timeline.back().t));  // drawn up to the stop
    }

    void timeline_decimation_keeps_every_buckets_maximum() {
        QVector<QPointF> pts;
        for (int i = 0; i < 65000; ++i) pts.append(QPointF(i, double((i * 7919) % 1000)));
        pts[40321].setY(5000);  // the single peak
        const QVector<QPointF> d = zeromem_gui::decimate_keep_max(pts, 4000);
        QVERIFY(d.size() <= 4000 && d.size() >= 2000);
        QCOMPARE(d.front(), pts.front());  // the line starts and ends where the run does
        QCOMPARE(d.back(), pts.back());
        QVERIFY(d.contains(QPointF(40321, 5000)));
        for (int i = 1; i < d.size(); ++i) QVERIFY(d[i - 1].x() < d[i].x());  // x order kept
        // Kept points are input points, and each of the 1999 buckets ((4000 - 2 end points) / 2: its
        // lowest and highest) keeps its maximum.
        for (const QPointF& p : d) QCOMPARE(pts[int(p.x())].y(), p.y());
        for (int b = 0; b < 1999; ++b) {
            const int begin = 65000 * b / 1999, end = 65000 * (b + 1) / 1999;
            double m = -1;
            for (int i = begin; i < end; ++i) m = std::max(m, pts[i].y());
            bool kept = false;
            for (const QPointF& p : d) kept = kept || (p.x() >= begin && p.x() < end && p.y() == m);
            QVERIFY(kept);
        }
        const QVector<QPointF> few = {QPointF(0, 1), QPointF(1, 3), QPointF(2, 2)};
        QCOMPARE(zeromem_gui::decimate_keep_max(few, 4000), few);  // short input: unchanged
    }

    void timeline_shows_the_simulators_message_for_params_only() {
        Request r = default_request();
        r.model.reset();
        r.params = "7e9";
        MainWindow w(r, {}, kData, false);
        QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
        w.tabs()->setCurrentWidget(w.timeline()->widget());
        w.select(0);
        QString expected;
        try {
            library_timeline(w, 0);
        } catch (const InputError& e) {
            expected = e.what();
        }
        QVERIFY(!expected.isEmpty());
        auto* msg = w.findChild<QLabel*>("timelineMessage");
        QVERIFY(msg);
        QVERIFY2(msg->text().endsWith(expected), qPrintable(msg->text()));
        QVERIFY(w.findChild<QChartView*>("timelineChartView")->isHidden());
        // The rest of the window keeps working: other tabs, selection, an input change.
        QVERIFY(w.last_error().isEmpty());
        w.select(1);
        QCOMPARE(w.selected(), 1);
        w.inputs()->gpus->setValue(16);
        QVERIFY(w.last_error().isEmpty());
        QCOMPARE(w.evaluation()->resolved.input.cluster.gpus, int64_t(16));
        QVERIFY(series<QScatterSeries>(w, "fits")->count() + series<QScatterSeries>(w, "tight")->count() +
                    series<QScatterSeries>(w, "hollow")->count() > 0);
        QVERIFY(msg->text().endsWith(expected));
    }

    // A tight option (Candidate::tight: fits only inside the estimate's error band) is shown apart from
    // the ones that fit with the margin: its own series (filled squares of another colour), "tight" in the
    // table's fits column, ranked after every option that fits with the margin
    // (compare's order, planner.h ranks_before); a plan step and the plan's chosen configuration say
    // "tight" exactly when their candidate is. Inputs: the two screenshots of docs/ (llama-3-70b on 16 x
    // H100-80GB at 2048 tokens and 16 accumulation steps,
    // mixtral-8x7b on 8 x H100-80GB at 6144 tokens), each with a tight option in compare.
    void tight_options_are_shown_apart_and_ranked_after_fitting_ones() {
        Request llama = default_request();
        llama.model = "llama-3-70b";
        llama.gpu = "H100-80GB";
        llama.gpus = 16;
        llama.nodes = 2;
        llama.host_memory = "2TiB";
        llama.seq_len = 2048;
        llama.grad_accum = 16;
        Request mixtral = default_request();
        mixtral.model = "mixtral-8x7b";
        mixtral.gpu = "H100-80GB";
        mixtral.host_memory = "2TiB";
        mixtral.seq_len = 6144;
        mixtral.grad_accum = 16;
        for (const auto& [r, network] : {std::pair{llama, std::string("ib-ndr400")}, std::pair{mixtral, std::string()}}) {
            MainWindow w(r, SpeedChoice{"", network, ""}, kData, false);
            QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
            const auto& rows = w.evaluation()->rows;
            const int n_tight = int(std::count_if(rows.begin(), rows.end(), [](const Candidate& c) { return c.tight; }));
            QVERIFY2(n_tight > 0, r.model->c_str());
            auto* fits = series<QScatterSeries>(w, "fits");
            auto* tight = series<QScatterSeries>(w, "tight");
            QVERIFY(same_points(sorted(tight->points()), expected_points(rows, true, true)));
            QVERIFY(same_points(sorted(fits->points()), expected_points(rows, true, false)));
            QCOMPARE(tight->markerShape(), QScatterSeries::MarkerShapeRectangle);
            QVERIFY(tight->color() != fits->color());
            QCOMPARE(tight->brush().color().alpha(), 255);  // filled, unlike the hollow "does not fit"
            // The table in compare's order: fitting with the margin, then tight, then not fitting.
            QAbstractItemModel* m = w.table()->model();
            QCOMPARE(m->rowCount(), int(rows.size()));
            int last_rank = 0, shown_tight = 0;
            for (int i = 0; i < m->rowCount(); ++i) {
                const QString cell = m->data(m->index(i, 1)).toString();
                const Candidate& c = rows[size_t(m->data(m->index(i, 0), Qt::UserRole + 1).toInt())];
                QCOMPARE(cell, QString(!c.fits ? "no" : c.tight ? "tight" : "yes"));
                const int rank = cell == "yes" ? 0 : cell == "tight" ? 1 : 2;
                QVERIFY2(rank >= last_rank, qPrintable(QString("row %1 (%2) after a worse one").arg(i).arg(cell)));
                last_rank = rank;
                shown_tight += cell == "tight";
                QCOMPARE(m->data(m->index(i, 1), Qt::BackgroundRole).isValid(), cell == "tight");  // tinted
                if (c.tight) QVERIFY(m->data(m->index(i, 0)).toString() == QString::fromStdString(c.option.label()));
            }
            QCOMPARE(shown_tight, n_tight);
            const PlanResult& pr = w.evaluation()->plan;
            for (int i = 0; i < int(pr.steps.size()); ++i) {  // a recipe step that lands on a tight fit says so
                const auto& c = pr.steps[size_t(i)].candidate;
                if (c && c->fits) QCOMPARE(w.plan_table()->item(i, 2)->text().contains("tight"), c->tight);
            }
            QVERIFY(pr.winner.has_value());
            QCOMPARE(w.plan_winner()->text().contains("<b>Tight:</b>"), pr.winner->tight);
        }
    }
};

QTEST_MAIN(GuiTest)
#include "gui_test.moc"
