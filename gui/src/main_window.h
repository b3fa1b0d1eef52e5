// zeromem-gui's main window: inputs on the left; speed-memory chart,
// breakdown, plan, table and timeline tabs on the right; exports in the File menu.
#pragma once

#include "charts.h"
#include "inputs_panel.h"
#include "scenario.h"

#include <QMainWindow>

#include <memory>
#include <optional>

class QLabel;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;
class QTableWidget;
class QTabWidget;

namespace zeromem_gui {

/// The main window. Every input change recomputes through evaluate()
/// (scenario.h) and redraws; a bad input shows the library's message and
/// keeps the last good picture.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    /// `base`: the request from the command line (fields without a widget,
    /// e.g. --tp, pass through). `remember_geometry`: restore and save the
    /// window size with QSettings (off for --screenshot).
    MainWindow(const zeromem::Request& base, const SpeedChoice& speed, const std::string& data_dir,
               bool remember_geometry, QWidget* parent = nullptr);

    /// The last good evaluation; unset before the first good input.
    const std::optional<Evaluation>& evaluation() const { return ev_; }
    /// The message of the last bad input; empty when the last input was good.
    const QString& last_error() const { return last_error_; }

    /// Index into evaluation()->rows of the selected option; -1 when none.
    int selected() const { return selected_; }
    void select(int row);

    /// Exports; each returns "" on success or a one-line error.
    QString export_chart_png(const QString& path);
    QString export_table_csv(const QString& path);
    QString export_ds_config(const QString& path);

    InputsPanel* inputs() const { return inputs_; }
    SpeedMemoryChart* chart() const { return chart_.get(); }
    QTabWidget* tabs() const { return tabs_; }
    QTableView* table() const { return table_; }
    QTableWidget* plan_table() const { return plan_table_; }
    QLabel* plan_winner() const { return plan_winner_; }
    TimelineChart* timeline() const { return timeline_.get(); }
    /// The library's warnings and notes for the current input (Resolved::warnings, ::notes), as the command
    /// line prints them; hidden when there are none.
    QLabel* warning_banner() const { return warning_banner_; }

public slots:
    /// Reads the inputs, evaluates and redraws (or shows the error).
    void recompute();

protected:
    void closeEvent(class QCloseEvent* e) override;

private:
    void build_tabs();
    void build_menu();
    void show_chart();
    void show_warnings();
    void show_breakdown();
    void show_table();
    void show_plan();
    void show_timeline();
    void show_visible_lazy_tabs();
    void sync_table_selection();
    void export_with_dialog(const QString& what, const QString& filter, QString (MainWindow::*fn)(const QString&));

    zeromem::Request base_;
    std::string data_dir_;
    bool remember_ = false;
    InputsPanel* inputs_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    std::unique_ptr<SpeedMemoryChart> chart_;
    std::unique_ptr<BreakdownChart> breakdown_;
    bool breakdown_dirty_ = false;  ///< the breakdown tab shows an older evaluation
    std::unique_ptr<TimelineChart> timeline_;
    bool timeline_dirty_ = false;   ///< the timeline tab shows an older evaluation or selection
    QLabel* ordering_ = nullptr;
    QLabel* warning_banner_ = nullptr;
    QTableView* table_ = nullptr;
    QStandardItemModel* model_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QLabel* plan_header_ = nullptr;
    QTableWidget* plan_table_ = nullptr;
    QLabel* plan_winner_ = nullptr;
    std::optional<Evaluation> ev_;
    QString last_error_;
    QString export_note_;  ///< said after an export (e.g. checkpointing is not a DeepSpeed key)
    int selected_ = -1;
    std::string selected_label_;
};

}  // namespace zeromem_gui
