// Main window (see main_window.h). Every number shown comes from the
// Evaluation (estimator and planner libraries) or the simulator's replay of
// the selected option (timeline tab); this file only converts bytes to GiB
// for display and formats text.
#include "main_window.h"

#include "timeline.h"

#include "zeromem/simulator.h"
#include "zeromem/util.h"
#include "zeromem/verdict_band.h"

#include <QAction>
#include <QBrush>
#include <QCloseEvent>
#include <QFile>
#include <QFileDialog>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTextStream>
#include <QVBoxLayout>

#include <fstream>

namespace zeromem_gui {

using zeromem::Candidate;

namespace {

constexpr int kValueRole = Qt::UserRole;      ///< numeric value of a table cell (sorting, CSV)
constexpr int kRowRole = Qt::UserRole + 1;    ///< index into Evaluation::rows (column 0)
const QColor kTightCell(255, 215, 170);       ///< background of a "tight" fits cell (the chart's orange, lighter)

/// Bytes to GiB (2^30 bytes) for display.
double gib(uint64_t bytes) { return double(bytes) / 1073741824.0; }

QString qs(const std::string& s) { return QString::fromStdString(s); }

/// Whether the option fits, in the words `zeromem compare` uses: "yes", "tight" (fits only inside the
/// estimate's error band, Candidate::tight) or "no".
QString fits_cell(const Candidate& c) { return !c.fits ? "no" : c.tight ? "tight" : "yes"; }

/// The same as a phrase for the tooltip.
QString fits_text(const Candidate& c) {
    return !c.fits ? QString("does not fit") : c.tight ? qs(zeromem::tight_words(c.memory)) : QString("fits");
}

QString tooltip(const Candidate& c) {
    return QString("<b>%1</b><br>micro batch %2 × %3 accumulation steps<br>"
                   "per-GPU peak: %4 GiB (%5)<br>host RAM per node: %6 GiB<br>"
                   "step time: %7 s<br>throughput: %8 tokens/s<br>%9 TFLOP/s per GPU, MFU %10 %<br>%11")
        .arg(qs(c.option.label()))
        .arg(c.micro_batch)
        .arg(c.grad_accum)
        .arg(gib(c.memory.per_gpu.total), 0, 'f', 2)
        .arg(qs(c.memory.peak_phase.empty() ? "peak" : c.memory.peak_phase))
        .arg(gib(c.memory.per_node.host_memory), 0, 'f', 2)
        .arg(c.time.total, 0, 'f', 3)
        .arg(c.time.tokens_per_s, 0, 'f', 0)
        .arg(c.time.tflops_per_gpu, 0, 'f', 1)
        .arg(c.time.mfu * 100, 0, 'f', 1)
        .arg(fits_text(c));
}

/// A table cell showing `v` with `decimals` and sorting by the number.
QStandardItem* num(double v, int decimals) {
    auto* it = new QStandardItem(QString::number(v, 'f', decimals));
    it->setData(v, kValueRole);
    it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    it->setEditable(false);
    return it;
}

QString csv_field(const QString& s) {
    if (!s.contains(',') && !s.contains('"')) return s;
    QString q = s;
    q.replace("\"", "\"\"");
    return "\"" + q + "\"";
}

/// The per-GPU components of the phase that sets the peak (falls back to
/// per_gpu when the convention has no phases).
const zeromem::GpuMemory& peak_components(const zeromem::Estimate& e) {
    for (const auto& p : e.phases)
        if (p.name == e.peak_phase) return p.per_gpu;
    return e.per_gpu;
}

}  // namespace

MainWindow::MainWindow(const zeromem::Request& base, const SpeedChoice& speed, const std::string& data_dir,
                       bool remember_geometry, QWidget* parent)
    : QMainWindow(parent), base_(base), data_dir_(data_dir), remember_(remember_geometry) {
    setWindowTitle(tr("zeromem-gui: ZeRO speed against memory"));
    inputs_ = new InputsPanel(data_dir, this);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(inputs_);
    scroll->setWidgetResizable(true);
    scroll->setMinimumWidth(360);
    auto* right = new QWidget(this);
    auto* rv = new QVBoxLayout(right);
    rv->setContentsMargins(0, 0, 0, 0);
    warning_banner_ = new QLabel(right);
    warning_banner_->setObjectName("warningBanner");
    warning_banner_->setTextFormat(Qt::PlainText);
    warning_banner_->setWordWrap(true);
    warning_banner_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
    warning_banner_->setStyleSheet("QLabel { background: #fff4ce; color: #5c3c00; border: 1px solid #e0b000; "
                                   "padding: 4px; }");
    warning_banner_->hide();
    rv->addWidget(warning_banner_);
    tabs_ = new QTabWidget(right);
    rv->addWidget(tabs_, 1);
    auto* split = new QSplitter(this);
    split->addWidget(scroll);
    split->addWidget(right);
    split->setStretchFactor(1, 1);
    setCentralWidget(split);
    build_tabs();
    build_menu();
    inputs_->set_from(base, speed);
    connect(inputs_, &InputsPanel::changed, this, &MainWindow::recompute);
    resize(1400, 900);
    if (remember_) restoreGeometry(QSettings().value("window/geometry").toByteArray());
    recompute();
}

void MainWindow::build_tabs() {
    auto* page = new QWidget(this);
    auto* v = new QVBoxLayout(page);
    chart_ = make_speed_memory_chart(page);
    v->addWidget(chart_->widget(), 1);
    ordering_ = new QLabel(page);
    ordering_->setWordWrap(true);
    ordering_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
    v->addWidget(ordering_);
    tabs_->addTab(page, tr("Speed vs memory"));
    connect(chart_.get(), &SpeedMemoryChart::pointClicked, this, &MainWindow::select);

    breakdown_ = make_breakdown_chart(this);
    tabs_->addTab(breakdown_->widget(), tr("Breakdown"));
    connect(tabs_, &QTabWidget::currentChanged, this, [this](int) { show_visible_lazy_tabs(); });

    auto* plan_page = new QWidget(this);
    auto* pv = new QVBoxLayout(plan_page);
    plan_header_ = new QLabel(plan_page);
    plan_header_->setWordWrap(true);
    plan_table_ = new QTableWidget(plan_page);
    plan_table_->setColumnCount(6);
    plan_table_->setHorizontalHeaderLabels({tr("recipe\nstep"), tr("what was tried"), tr("outcome"),
                                            tr("configuration"), tr("per-GPU peak\n(GiB)"), tr("tokens/s")});
    plan_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    plan_table_->setWordWrap(true);
    plan_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    plan_table_->horizontalHeader()->setStretchLastSection(true);
    plan_table_->verticalHeader()->hide();
    const int widths[] = {55, 215, 240, 240, 100};  // every column on screen at the default window size
    for (int c = 0; c < 5; ++c) plan_table_->setColumnWidth(c, widths[c]);
    plan_winner_ = new QLabel(plan_page);
    plan_winner_->setWordWrap(true);
    plan_winner_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
    pv->addWidget(plan_header_);
    pv->addWidget(plan_table_, 1);
    pv->addWidget(plan_winner_);
    tabs_->addTab(plan_page, tr("Plan"));

    model_ = new QStandardItemModel(this);
    // The verdict first (option, fits, per-GPU peak, throughput), so it is on screen at the default size.
    model_->setHorizontalHeaderLabels({tr("option"), tr("fits"), tr("per-GPU peak (GiB)"), tr("throughput (tokens/s)"),
                                       tr("micro batch"), tr("grad accum steps"), tr("host RAM per node (GiB)"),
                                       tr("NVMe per node (GiB)"), tr("step time (s)"), tr("TFLOP/s per GPU"),
                                       tr("MFU (%)")});
    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(model_);
    proxy_->setSortRole(kValueRole);
    table_ = new QTableView(this);
    table_->setModel(proxy_);
    table_->setSortingEnabled(true);
    table_->sortByColumn(-1, Qt::AscendingOrder);  // compare's order (fitting first, then by tokens/s) until a header is clicked
    table_->verticalHeader()->hide();
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->horizontalHeader()->setStretchLastSection(true);
    tabs_->addTab(table_, tr("Table"));

    timeline_ = make_timeline_chart(this);
    tabs_->addTab(timeline_->widget(), tr("Timeline"));
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur, const QModelIndex&) {
                if (!cur.isValid()) return;
                const int row = proxy_->data(proxy_->index(cur.row(), 0), kRowRole).toInt();
                if (row != selected_) select(row);
            });
}

void MainWindow::build_menu() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* png = file->addAction(tr("Export chart as &PNG…"));
    png->setShortcut(QKeySequence(tr("Ctrl+E")));
    connect(png, &QAction::triggered, this,
            [this]() { export_with_dialog(tr("Chart image"), tr("PNG (*.png)"), &MainWindow::export_chart_png); });
    QAction* csv = file->addAction(tr("Export table as &CSV…"));
    csv->setShortcut(QKeySequence(tr("Ctrl+Shift+E")));
    connect(csv, &QAction::triggered, this,
            [this]() { export_with_dialog(tr("Table"), tr("CSV (*.csv)"), &MainWindow::export_table_csv); });
    QAction* ds = file->addAction(tr("Export selected option as &DeepSpeed config…"));
    ds->setShortcut(QKeySequence(tr("Ctrl+D")));
    connect(ds, &QAction::triggered, this,
            [this]() { export_with_dialog(tr("DeepSpeed config"), tr("JSON (*.json)"), &MainWindow::export_ds_config); });
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"));
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);
    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (int i = 0; i < tabs_->count(); ++i) {
        QAction* a = view->addAction(tabs_->tabText(i));
        a->setShortcut(QKeySequence(Qt::ALT | Qt::Key(Qt::Key_1 + i)));
        connect(a, &QAction::triggered, this, [this, i]() { tabs_->setCurrentIndex(i); });
    }
}

void MainWindow::recompute() {
    try {
        Evaluation ev = evaluate(inputs_->request(base_), inputs_->speed(), data_dir_);
        ev_ = std::move(ev);
    } catch (const std::exception& e) {  // zeromem::InputError, or a file the library could not parse
        last_error_ = QString::fromUtf8(e.what());
        inputs_->show_error(last_error_);
        statusBar()->showMessage(tr("Input not valid: the picture still shows the last good input."));
        return;
    }
    last_error_.clear();
    inputs_->clear_errors();
    selected_ = -1;
    for (size_t i = 0; i < ev_->rows.size(); ++i)
        if (ev_->rows[i].option.label() == selected_label_) selected_ = int(i);
    show_chart();
    breakdown_dirty_ = true;  // drawn now if visible, else when its tab is opened
    timeline_dirty_ = true;
    show_visible_lazy_tabs();
    show_table();
    show_plan();
    chart_->setSelected(selected_);
    sync_table_selection();
    show_warnings();
}

void MainWindow::show_warnings() {
    const zeromem::Resolved& res = ev_->resolved;
    QStringList lines;
    for (const auto& w : res.warnings) lines << tr("warning: %1").arg(qs(w));
    for (const auto& n : res.notes) lines << tr("note: %1").arg(qs(n));
    warning_banner_->setText(lines.join('\n'));
    warning_banner_->setVisible(!lines.isEmpty());
    const auto& in = res.input;
    setWindowTitle(tr("zeromem-gui: %1 on %2 × %3").arg(qs(in.model.name)).arg(in.cluster.gpus).arg(qs(ev_->hw.gpu_name)));
    statusBar()->showMessage(res.warnings.empty() ? tr("Up to date.")
                                                  : tr("Up to date; %n warning(s) above the tabs.", "", int(res.warnings.size())));
}

void MainWindow::show_chart() {
    const Evaluation& ev = *ev_;
    const auto& in = ev.resolved.input;
    SpeedMemoryData d;
    d.title = QString("%1 (%2 B params), %3 × %4 (%5 node%6), global batch %7, seq %8 tokens, %9")
                  .arg(qs(in.model.name))
                  .arg(double(in.model.params) / 1e9, 0, 'f', 2)
                  .arg(in.cluster.gpus)
                  .arg(qs(ev.hw.gpu_name))
                  .arg(in.cluster.nodes)
                  .arg(in.cluster.nodes > 1 ? "s" : "")
                  .arg(ev.global_batch)
                  .arg(in.train.seq_len)
                  .arg(zeromem::to_string(in.train.dtype));
    for (const Candidate& c : ev.rows)
        d.points.append({qs(short_label(c.option)), tooltip(c), gib(c.memory.per_gpu.total), c.time.tokens_per_s, c.fits,
                         c.tight});
    d.capacity_gib = gib(ev.gpu_capacity);
    for (const auto& g : ev.ordering)
        if (g.row >= 0) d.ordering_path.append(g.row);
    d.ordering_name = tr("recipe's ordering (see below)");  // short: the legend keeps it whole
    chart_->setData(d);
    QStringList lines = {tr("<b>The ZeRO tuning recipe's ordering</b>, fastest first: stage 0 > 1 > 2 > 2+offload > 3 > "
                            "3+offload (the dotted path joins each group's fastest fitting option):")};
    const auto statement = zeromem::ordering_statement(ev.rows);
    for (size_t i = 1; i < statement.size(); ++i) lines << qs(statement[i]).toHtmlEscaped();
    ordering_->setText(lines.join("<br>"));
}

void MainWindow::show_breakdown() {
    if (!ev_) return;
    breakdown_dirty_ = false;
    BreakdownData d;
    d.segment_names = {tr("parameters"), tr("gradients"), tr("optimizer states"), tr("activations"),
                       tr("temporary buffers"), tr("per-process terms"), tr("fragmentation")};
    for (const Candidate& c : ev_->rows) {
        const zeromem::GpuMemory& m = peak_components(c.memory);
        d.bars.append({qs(short_label(c.option)),
                       {gib(m.parameters), gib(m.gradients), gib(m.optimizer_states), gib(m.activations),
                        gib(m.temporary_buffers), gib(m.cuda_context + m.nccl_buffers + m.cublas_workspaces + m.process_baseline),
                        gib(m.fragmentation)},
                       gib(c.memory.per_node.host_memory)});
    }
    d.capacity_gib = gib(ev_->gpu_capacity);
    d.host_capacity_gib = gib(ev_->host_capacity);
    breakdown_->setData(d);
}

void MainWindow::show_visible_lazy_tabs() {
    if (breakdown_dirty_ && tabs_->currentWidget() == breakdown_->widget()) show_breakdown();
    if (timeline_dirty_ && tabs_->currentWidget() == timeline_->widget()) show_timeline();
}

void MainWindow::show_timeline() {
    if (!ev_) return;
    timeline_dirty_ = false;
    TimelineData d;
    if (selected_ < 0) {
        d.message = tr("Select an option (click a point or a table row) to replay its training steps in the "
                       "simulator (zeromem simulate).");
        timeline_->setData(d);
        return;
    }
    const Candidate& c = ev_->rows[size_t(selected_)];
    zeromem::EstimateInput in = ev_->resolved.input;
    zeromem::apply_candidate(c, in);
    const zeromem::sim::SimOptions opt{};
    zeromem::sim::SimResult r;
    try {
        r = zeromem::sim::simulate(in, opt);
    } catch (const std::exception& e) {  // zeromem::InputError: an input the simulator does not replay
        d.message = tr("No timeline for %1: %2").arg(qs(c.option.label()), QString::fromUtf8(e.what()));
        timeline_->setData(d);
        return;
    }
    d = timeline_data(r, tr("%1, micro batch %2 × %3 accumulation steps: one rank, %4 optimizer steps")
                             .arg(qs(c.option.label()))
                             .arg(c.micro_batch)
                             .arg(c.grad_accum)
                             .arg(opt.steps));
    d.capacity_gib = gib(ev_->gpu_capacity);
    d.note = tr("%1 events replayed through the caching-allocator model (zeromem simulate); %2; peak reserved %3 GiB at event %4.")
                 .arg(qulonglong(r.timeline.size()))
                 .arg(d.peak_label)
                 .arg(gib(r.peak_reserved), 0, 'f', 2)
                 .arg(qulonglong(r.peak_reserved_t));
    if (r.oom)
        d.note += tr(" Out of memory at event %1 (%2 in %3, phase %4): the replay stops there, as the job would.")
                      .arg(qulonglong(r.oom->t))
                      .arg(qs(r.oom->term), qs(r.oom->module), QString::fromUtf8(zeromem::sim::to_string(r.oom->phase)));
    timeline_->setData(d);
}

void MainWindow::show_table() {
    model_->removeRows(0, model_->rowCount());
    for (size_t i = 0; i < ev_->rows.size(); ++i) {
        const Candidate& c = ev_->rows[i];
        auto* name = new QStandardItem(qs(c.option.label()));
        name->setData(qs(c.option.label()), kValueRole);
        name->setData(int(i), kRowRole);
        name->setEditable(false);
        auto* fits = new QStandardItem(fits_cell(c));
        fits->setData(fits_cell(c), kValueRole);
        fits->setEditable(false);
        if (c.tight) fits->setData(QBrush(kTightCell), Qt::BackgroundRole);  // the chart's tight colour, lighter
        model_->appendRow({name, fits, num(gib(c.memory.per_gpu.total), 2), num(c.time.tokens_per_s, 0),
                           num(double(c.micro_batch), 0), num(double(c.grad_accum), 0),
                           num(gib(c.memory.per_node.host_memory), 2), num(gib(c.memory.per_node.nvme), 2),
                           num(c.time.total, 3), num(c.time.tflops_per_gpu, 1), num(c.time.mfu * 100, 1)});
    }
    table_->resizeColumnsToContents();
}

void MainWindow::show_plan() {
    const zeromem::PlanResult& r = ev_->plan;
    plan_header_->setText(tr("The ZeRO tuning recipe, step by step as <tt>zeromem plan</tt> walks it "
                             "(global batch %1; %2 configurations evaluated):")
                              .arg(ev_->global_batch)
                              .arg(qulonglong(r.candidates)));
    plan_table_->setRowCount(int(r.steps.size()));
    for (int i = 0; i < int(r.steps.size()); ++i) {
        const zeromem::PlanStep& s = r.steps[size_t(i)];
        plan_table_->setItem(i, 0, new QTableWidgetItem(QString::number(s.recipe_step)));
        plan_table_->setItem(i, 1, new QTableWidgetItem(qs(s.action)));
        plan_table_->setItem(i, 2, new QTableWidgetItem(qs(s.outcome)));
        const Candidate* c = s.candidate ? &*s.candidate : nullptr;
        plan_table_->setItem(i, 3, new QTableWidgetItem(c ? QString("%1, micro batch %2 × %3 accumulation steps")
                                                                .arg(qs(c->option.label()))
                                                                .arg(c->micro_batch)
                                                                .arg(c->grad_accum)
                                                          : QString()));
        plan_table_->setItem(i, 4, new QTableWidgetItem(c ? QString::number(gib(c->memory.per_gpu.total), 'f', 2) : ""));
        plan_table_->setItem(i, 5, new QTableWidgetItem(c ? QString::number(c->time.tokens_per_s, 'f', 0) : ""));
    }
    plan_table_->resizeRowsToContents();
    if (!r.winner) {
        plan_winner_->setText(tr("<b>No configuration fits</b>, not even with NVMe offload at micro batch 1."));
        return;
    }
    const Candidate& w = *r.winner;
    plan_winner_->setText(tr("<b>Chosen configuration:</b> %1, micro batch %2 × %3 accumulation steps, overlap_comm %4, "
                             "reduce_bucket_size %5 elements; %6 GiB per GPU, %7 GiB host RAM per node; "
                             "step %8 s, %9 tokens/s, %10 TFLOP/s per GPU (MFU %11 %).")
                              .arg(qs(w.option.label()))
                              .arg(w.micro_batch)
                              .arg(w.grad_accum)
                              .arg(w.overlap_comm ? "true" : "false")
                              .arg(w.reduce_bucket_size)
                              .arg(gib(w.memory.per_gpu.total), 0, 'f', 2)
                              .arg(gib(w.memory.per_node.host_memory), 0, 'f', 2)
                              .arg(w.time.total, 0, 'f', 3)
                              .arg(w.time.tokens_per_s, 0, 'f', 0)
                              .arg(w.time.tflops_per_gpu, 0, 'f', 1)
                              .arg(w.time.mfu * 100, 0, 'f', 1) +
                          (w.tight ? tr("<br><b>Tight:</b> %1; plan found no option that fits with the margin.")
                                         .arg(qs(zeromem::tight_words(w.memory)).toHtmlEscaped())
                                   : QString()));
}

void MainWindow::select(int row) {
    if (!ev_ || row < 0 || row >= int(ev_->rows.size())) return;
    selected_ = row;
    selected_label_ = ev_->rows[size_t(row)].option.label();
    chart_->setSelected(row);
    sync_table_selection();
    timeline_dirty_ = true;
    show_visible_lazy_tabs();
    statusBar()->showMessage(tr("Selected: %1").arg(qs(selected_label_)));
}

void MainWindow::sync_table_selection() {
    for (int r = 0; r < proxy_->rowCount(); ++r)
        if (proxy_->data(proxy_->index(r, 0), kRowRole).toInt() == selected_) {
            const QSignalBlocker block(table_->selectionModel());
            table_->selectionModel()->setCurrentIndex(proxy_->index(r, 0), QItemSelectionModel::ClearAndSelect |
                                                                               QItemSelectionModel::Rows);
            table_->viewport()->update();
            return;
        }
    table_->clearSelection();
}

QString MainWindow::export_chart_png(const QString& path) {
    const QImage img = chart_->image();
    if (img.isNull()) return tr("%1: the chart could not be rendered").arg(path);
    if (!img.save(path, "PNG")) return tr("%1: cannot write the PNG file").arg(path);
    return {};
}

QString MainWindow::export_table_csv(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Text)) return tr("%1: cannot write the CSV file").arg(path);
    QTextStream out(&f);
    QStringList header;
    for (int c = 0; c < proxy_->columnCount(); ++c) header << csv_field(proxy_->headerData(c, Qt::Horizontal).toString());
    out << header.join(',') << '\n';
    for (int r = 0; r < proxy_->rowCount(); ++r) {
        QStringList cells;
        for (int c = 0; c < proxy_->columnCount(); ++c) {
            const QVariant v = proxy_->data(proxy_->index(r, c), kValueRole);
            cells << csv_field(v.typeId() == QMetaType::Double ? QString::number(v.toDouble(), 'g', 12) : v.toString());
        }
        out << cells.join(',') << '\n';
    }
    out.flush();
    return f.error() == QFile::NoError ? QString() : tr("%1: cannot write the CSV file").arg(path);
}

QString MainWindow::export_ds_config(const QString& path) {
    if (!ev_ || selected_ < 0) return tr("select an option first (click a point or a table row)");
    const nlohmann::json cfg = zeromem::emit_ds_config(ev_->rows[size_t(selected_)], ev_->resolved.input, false);
    std::ofstream out(path.toStdString());
    out << cfg.dump(2) << "\n";
    if (!out) return tr("%1: cannot write the DeepSpeed config").arg(path);
    const auto ck = ev_->rows[size_t(selected_)].option.checkpointing;
    if (ck != zeromem::Checkpointing::none)
        export_note_ = tr("; enable gradient checkpointing (%1) in the model, it is not a DeepSpeed config key")
                           .arg(zeromem::to_string(ck));
    if (ev_->rows[size_t(selected_)].tight)
        export_note_ += tr("; this option is %1").arg(qs(zeromem::tight_words(ev_->rows[size_t(selected_)].memory)));
    return {};
}

void MainWindow::export_with_dialog(const QString& what, const QString& filter,
                                    QString (MainWindow::*fn)(const QString&)) {
    const QString path = QFileDialog::getSaveFileName(this, what, QString(), filter);
    if (path.isEmpty()) return;
    export_note_.clear();
    const QString err = (this->*fn)(path);
    if (!err.isEmpty())
        QMessageBox::warning(this, what, err);
    else
        statusBar()->showMessage(tr("Wrote %1").arg(path) + export_note_);
}

void MainWindow::closeEvent(QCloseEvent* e) {
    if (remember_) QSettings().setValue("window/geometry", saveGeometry());
    QMainWindow::closeEvent(e);
}

}  // namespace zeromem_gui
