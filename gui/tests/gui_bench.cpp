// Recompute + redraw after one input change, offscreen (QBENCHMARK).
// Run: QT_QPA_PLATFORM=offscreen ./build/gui/tests/zeromem_gui_bench -iterations 50
// Not run by ctest (speed is measured, never asserted).
#include "main_window.h"

#include <QSpinBox>
#include <QTabWidget>
#include <QStandardPaths>
#include <QtTest>

namespace {

zeromem::Request bench_request() {
    zeromem::Request r;
    r.model = "llama-2-7b";
    r.gpu = "A100-80GB";
    r.gpus = 8;
    r.host_memory = "1TB";
    r.seq_len = 4096;
    r.grad_accum = 8;
    return r;
}

}  // namespace

class GuiBench : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    /// One GPU-count change: evaluate (compare + plan), update every tab, and
    /// render the speed-memory chart to an image (the redraw).
    void input_change_recompute_and_redraw() {
        zeromem_gui::MainWindow w(bench_request(), {}, ZEROMEM_SOURCE_DATA_DIR, false);
        w.resize(1400, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        int n = 0;
        QBENCHMARK {
            w.inputs()->gpus->setValue(++n % 2 ? 16 : 8);
            const QImage img = w.chart()->image();
            QVERIFY(!img.isNull());
        }
    }

    /// The same change with the breakdown tab shown: its bars are updated
    /// and drawn instead of the speed-memory chart.
    void input_change_breakdown_tab() {
        zeromem_gui::MainWindow w(bench_request(), {}, ZEROMEM_SOURCE_DATA_DIR, false);
        w.resize(1400, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.tabs()->setCurrentIndex(1);
        int n = 0;
        QBENCHMARK {
            w.inputs()->gpus->setValue(++n % 2 ? 16 : 8);
            QVERIFY(!w.tabs()->currentWidget()->grab().isNull());
        }
    }

    /// The same change without rendering: the library calls and widget updates.
    void input_change_recompute_only() {
        zeromem_gui::MainWindow w(bench_request(), {}, ZEROMEM_SOURCE_DATA_DIR, false);
        w.resize(1400, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        int n = 0;
        QBENCHMARK { w.inputs()->gpus->setValue(++n % 2 ? 16 : 8); }
    }

    /// The library part alone: evaluate() (resolve, compare, ordering, plan).
    void evaluate_only() {
        zeromem::Request r = bench_request();
        int n = 0;
        QBENCHMARK {
            r.gpus = ++n % 2 ? 16 : 8;
            const auto ev = zeromem_gui::evaluate(r, {}, ZEROMEM_SOURCE_DATA_DIR);
            QVERIFY(!ev.rows.empty());
        }
    }
};

QTEST_MAIN(GuiBench)
#include "gui_bench.moc"
