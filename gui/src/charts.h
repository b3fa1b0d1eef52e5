// The chart layer: series in, image and selection out. Only
// qtcharts_backend.cpp includes Qt Charts, so a move to Qt Graphs replaces
// that file alone. Numbers arrive already computed (by the libraries) and
// already in display units.
#pragma once

#include <QImage>
#include <QObject>
#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>

#include <cstdint>
#include <memory>

class QWidget;

namespace zeromem_gui {

/// One ZeRO option on the speed-memory chart.
struct OptionPoint {
    QString label;        ///< short label drawn beside the point
    QString tooltip;      ///< the option's numbers, with units
    double memory_gib = 0;   ///< x: per-GPU peak memory, GiB (2^30 bytes)
    double tokens_per_s = 0; ///< y: throughput of the whole cluster, tokens/s
    bool fits = false;    ///< drawn filled when true, hollow when false
    /// Fits only inside the estimate's error band (Candidate::tight): drawn as a filled square of its own
    /// colour, apart from the options that fit with the margin.
    bool tight = false;
};

/// Everything the speed-memory chart draws. The x axis frames the options that fit and the capacity line
/// (with a margin); an option that does not fit and lies beyond it is drawn pinned at the right edge, in the
/// "off scale" series, its label saying "> x GiB" with its value.
struct SpeedMemoryData {
    QString title;
    QVector<OptionPoint> points;
    double capacity_gib = 0;    ///< vertical line: the GPU's memory, GiB
    QVector<int> ordering_path; ///< indices into points, the recipe's ordering, fastest first
    QString ordering_name;      ///< legend text of the path
};

/// Per-GPU peak memory (x) against tokens/s (y), one point per option.
class SpeedMemoryChart : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    ~SpeedMemoryChart() override = default;
    /// The widget to put in a layout (owned by the chart object's parent widget).
    virtual QWidget* widget() = 0;
    /// Replaces every series.
    virtual void setData(const SpeedMemoryData& data) = 0;
    /// Marks point `index` (into the last data's points) as selected; -1 clears.
    virtual void setSelected(int index) = 0;
    virtual int selected() const = 0;
    /// The chart as drawn now, at the widget's size.
    virtual QImage image() = 0;
signals:
    /// The user clicked point `index`.
    void pointClicked(int index);
};

/// One stacked bar: an option's per-GPU memory by component, and its host
/// memory per node.
struct BreakdownBar {
    QString label;
    QVector<double> segments_gib;  ///< one per BreakdownData::segment_names, GiB
    double host_gib = 0;           ///< host RAM per node, GiB
};

/// Everything the breakdown charts draw.
struct BreakdownData {
    QStringList segment_names;
    QVector<BreakdownBar> bars;
    double capacity_gib = 0;       ///< vertical line on the per-GPU bars: the GPU's memory, GiB; 0 = none
    double host_capacity_gib = 0;  ///< vertical line on the host bars: usable host RAM per node, GiB; 0 = unknown
};

/// Stacked per-GPU bars per option, with host memory per node beside them.
class BreakdownChart : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    ~BreakdownChart() override = default;
    virtual QWidget* widget() = 0;
    virtual void setData(const BreakdownData& data) = 0;
};

/// A run of consecutive simulator events in one phase, shaded on the timeline.
struct TimelineBand {
    QString phase;      ///< the simulator's phase name ("load", "forward", ..., "steady_backward")
    double begin = 0;   ///< x of the band's first event (event index)
    double end = 0;     ///< x where the next band starts (event index)
};

/// Everything the timeline chart draws: one rank's simulated run.
struct TimelineData {
    QString title;
    QString message;             ///< when not empty: shown instead of the chart (e.g. the simulator's InputError)
    QString note;                ///< shown above the chart (what was replayed, an out-of-memory stop)
    int64_t events = 0;          ///< timeline rows before decimation
    QVector<QPointF> allocated;  ///< (event index, memory_allocated() after it in GiB), decimated
    QVector<QPointF> reserved;   ///< (event index, memory_reserved() after it in GiB), decimated
    QVector<TimelineBand> bands; ///< in event order
    QPointF peak;                ///< the peak allocated point (event index, GiB)
    QString peak_label;          ///< its value, event and module
    double capacity_gib = 0;     ///< horizontal line: the GPU's memory, GiB; 0 = none
};

/// Allocated and reserved memory over the simulated step, phases shaded,
/// the peak allocated point marked; or a message when there is no timeline.
class TimelineChart : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    ~TimelineChart() override = default;
    virtual QWidget* widget() = 0;
    virtual void setData(const TimelineData& data) = 0;
    /// The chart as drawn now, at the widget's size.
    virtual QImage image() = 0;
};

/// The Qt Charts implementations; `parent` owns the widgets.
std::unique_ptr<SpeedMemoryChart> make_speed_memory_chart(QWidget* parent);
std::unique_ptr<BreakdownChart> make_breakdown_chart(QWidget* parent);
std::unique_ptr<TimelineChart> make_timeline_chart(QWidget* parent);

}  // namespace zeromem_gui
