// Qt Charts 6.4 implementation of the chart layer (charts.h). The only file
// of the GUI that includes Qt Charts. Facts used: QChartView/QChart take
// ownership of series and axes; a series must be attached to its axes;
// QXYSeries::replace swaps all points at once (Qt Charts 6.4.2 sources).
#include "charts.h"

#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QGraphicsSimpleTextItem>
#include <QHBoxLayout>
#include <QHorizontalBarSeries>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <map>

namespace zeromem_gui {

namespace {

/// Speed-memory chart on a QChartView: three scatter series (filled circles:
/// fits with the margin, filled squares: tight, hollow: does not fit), a
/// selection ring, the capacity line and the ordering path.
class QtSpeedMemoryChart final : public SpeedMemoryChart {
public:
    explicit QtSpeedMemoryChart(QWidget* parent) {
        chart_ = new QChart;
        view_ = new QChartView(chart_, parent);
        view_->setRenderHint(QPainter::Antialiasing);
        view_->setFocusPolicy(Qt::StrongFocus);
        view_->setObjectName("speedMemoryChartView");
        chart_->legend()->setAlignment(Qt::AlignBottom);
        x_ = new QValueAxis;
        y_ = new QValueAxis;
        x_->setTitleText("per-GPU peak memory (GiB, 2^30 bytes)");
        y_->setTitleText("throughput (tokens/s, whole cluster)");
        x_->setLabelFormat("%.0f");
        y_->setLabelFormat("%.0f");
        chart_->addAxis(x_, Qt::AlignBottom);
        chart_->addAxis(y_, Qt::AlignLeft);
        path_ = add_series<QLineSeries>("ordering");
        capacity_ = add_series<QLineSeries>("capacity");
        fits_ = add_series<QScatterSeries>("fits");
        tight_ = add_series<QScatterSeries>("tight");
        hollow_ = add_series<QScatterSeries>("hollow");
        ring_ = add_series<QScatterSeries>("selected");
        style_series();
        for (QScatterSeries* s : {fits_, tight_, hollow_, ring_}) {
            connect(s, &QScatterSeries::clicked, this, [this](const QPointF& p) { on_click(p); });
            connect(s, &QScatterSeries::hovered, this, [this](const QPointF& p, bool on) { on_hover(p, on); });
        }
        connect(chart_, &QChart::plotAreaChanged, this, [this](const QRectF&) { place_labels(); });
    }

    QWidget* widget() override { return view_; }

    void setData(const SpeedMemoryData& data) override {
        data_ = data;
        chart_->setTitle(data.title);
        QList<QPointF> in, tight, out, path;
        double xmax = data.capacity_gib, ymax = 0;
        for (const OptionPoint& p : data.points) {
            (!p.fits ? out : p.tight ? tight : in).append(QPointF(p.memory_gib, p.tokens_per_s));
            xmax = std::max(xmax, p.memory_gib);
            ymax = std::max(ymax, p.tokens_per_s);
        }
        for (int i : data.ordering_path) path.append(QPointF(data.points[i].memory_gib, data.points[i].tokens_per_s));
        if (ymax <= 0) ymax = 1;
        x_->setRange(0, xmax * 1.08);
        y_->setRange(0, ymax * 1.12);
        x_->applyNiceNumbers();
        y_->applyNiceNumbers();
        fits_->replace(in);
        tight_->replace(tight);
        hollow_->replace(out);
        path_->replace(path);
        path_->setName(data.ordering_name);
        capacity_->replace({QPointF(data.capacity_gib, 0), QPointF(data.capacity_gib, y_->max())});
        capacity_->setName(QString("GPU capacity (%1 GiB)").arg(data.capacity_gib, 0, 'f', 1));
        make_labels();
        setSelected(selected_ < int(data.points.size()) ? selected_ : -1);
    }

    void setSelected(int index) override {
        selected_ = index;
        if (index >= 0 && index < int(data_.points.size()))
            ring_->replace({QPointF(data_.points[index].memory_gib, data_.points[index].tokens_per_s)});
        else
            ring_->clear();
        for (int i = 0; i < labels_.size(); ++i) {
            QFont f = labels_[i]->font();
            f.setBold(i == index);
            labels_[i]->setFont(f);
        }
    }

    int selected() const override { return selected_; }

    QImage image() override { return view_->grab().toImage(); }

private:
    template <class Series>
    Series* add_series(const char* name) {
        auto* s = new Series;
        s->setObjectName(name);
        chart_->addSeries(s);
        s->attachAxis(x_);
        s->attachAxis(y_);
        return s;
    }

    // After addSeries, so the theme does not paint over these.
    void style_series() {
        const QColor blue(31, 119, 180);
        fits_->setName("fits (filled)");
        fits_->setMarkerSize(11);
        fits_->setColor(blue);
        fits_->setBorderColor(blue);
        const QColor orange(255, 127, 14);
        tight_->setName("tight (filled square)");
        tight_->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
        tight_->setMarkerSize(11);
        tight_->setColor(orange);
        tight_->setBorderColor(orange);
        hollow_->setName("does not fit (hollow)");
        hollow_->setMarkerSize(11);
        hollow_->setBrush(QBrush(Qt::transparent));
        hollow_->setPen(QPen(QColor(214, 39, 40), 2));
        ring_->setName("selected");
        ring_->setMarkerSize(22);
        ring_->setBrush(QBrush(Qt::transparent));
        ring_->setPen(QPen(Qt::black, 2));
        capacity_->setPen(QPen(QColor(214, 39, 40), 2, Qt::DashLine));
        path_->setPen(QPen(QColor(120, 120, 120), 1.5, Qt::DotLine));
    }

    void make_labels() {
        for (QGraphicsSimpleTextItem* l : labels_) delete l;
        labels_.clear();
        for (const OptionPoint& p : data_.points) {
            auto* item = new QGraphicsSimpleTextItem(p.label, chart_);
            item->setZValue(20);
            labels_.append(item);
        }
        place_labels();
    }

    /// Puts each label right of its point, moved down in line steps until it
    /// overlaps no label placed before it (options often share a spot).
    void place_labels() {
        QVector<QRectF> placed;
        for (int i = 0; i < labels_.size() && i < data_.points.size(); ++i) {
            const OptionPoint& p = data_.points[i];
            const QPointF at = chart_->mapToPosition(QPointF(p.memory_gib, p.tokens_per_s), capacity_);
            const QRectF box = labels_[i]->boundingRect();
            QPointF pos = at + QPointF(8, -box.height() / 2);
            for (int step = 0; step < 12; ++step) {
                const QRectF r(pos, box.size());
                if (std::none_of(placed.begin(), placed.end(), [&r](const QRectF& q) { return q.intersects(r); })) break;
                pos.ry() += box.height();
            }
            labels_[i]->setPos(pos);
            placed.append(QRectF(pos, box.size()));
        }
    }

    /// The point nearest `p` in screen space (the series hold exact values).
    int index_of(const QPointF& p) const {
        int best = -1;
        double best_d = 0;
        for (int i = 0; i < data_.points.size(); ++i) {
            const OptionPoint& o = data_.points[i];
            const QPointF a = chart_->mapToPosition(QPointF(o.memory_gib, o.tokens_per_s), capacity_);
            const QPointF b = chart_->mapToPosition(p, capacity_);
            const double d = std::hypot(a.x() - b.x(), a.y() - b.y());
            if (best < 0 || d < best_d) {
                best = i;
                best_d = d;
            }
        }
        return best;
    }

    void on_click(const QPointF& p) {
        const int i = index_of(p);
        if (i < 0) return;
        setSelected(i);
        emit pointClicked(i);
    }

    void on_hover(const QPointF& p, bool on) {
        const int i = index_of(p);
        if (on && i >= 0)
            QToolTip::showText(QCursor::pos(), data_.points[i].tooltip, view_);
        else
            QToolTip::hideText();
    }

    QChart* chart_ = nullptr;
    QChartView* view_ = nullptr;
    QValueAxis *x_ = nullptr, *y_ = nullptr;
    QScatterSeries *fits_ = nullptr, *tight_ = nullptr, *hollow_ = nullptr, *ring_ = nullptr;
    QLineSeries *capacity_ = nullptr, *path_ = nullptr;
    QVector<QGraphicsSimpleTextItem*> labels_;
    SpeedMemoryData data_;
    int selected_ = -1;
};

/// Horizontal stacked bars (per-GPU components) and host RAM per node.
class QtBreakdownChart final : public BreakdownChart {
public:
    explicit QtBreakdownChart(QWidget* parent) {
        box_ = new QWidget(parent);
        box_->setObjectName("breakdown");
        auto* lay = new QHBoxLayout(box_);
        gpu_ = new QChartView(new QChart, box_);
        host_ = new QChartView(new QChart, box_);
        gpu_->setObjectName("breakdownGpuView");
        host_->setObjectName("breakdownHostView");
        gpu_->chart()->setTitle("Per-GPU memory at the peak phase (GiB)");
        host_->chart()->setTitle("Host RAM per node (GiB)");
        host_->chart()->legend()->hide();
        gpu_->chart()->legend()->setAlignment(Qt::AlignRight);
        lay->addWidget(gpu_, 5);
        lay->addWidget(host_, 2);
    }

    QWidget* widget() override { return box_; }

    void setData(const BreakdownData& data) override {
        QStringList cats;
        double gpu_max = 0, host_max = 0;
        for (const BreakdownBar& b : data.bars) {
            cats.prepend(b.label);  // first option on top
            double sum = 0;
            for (double v : b.segments_gib) sum += v;  // bar length, to size the axis
            gpu_max = std::max(gpu_max, sum);
            host_max = std::max(host_max, b.host_gib);
        }
        if (!same_shape(data)) rebuild(data);
        // Update values in place: rebuilding the series costs ~10 ms a change.
        const int n = int(data.bars.size());
        for (int s = 0; s < data.segment_names.size(); ++s)
            for (int b = 0; b < n; ++b) stack_->barSets()[s]->replace(b, data.bars[n - 1 - b].segments_gib.value(s));
        for (int b = 0; b < n; ++b) hosts_->barSets()[0]->replace(b, data.bars[n - 1 - b].host_gib);
        set_axes(gpu_axes_, cats, gpu_max);
        set_axes(host_axes_, cats, host_max);
    }

private:
    struct Axes {
        QBarCategoryAxis* cats = nullptr;
        QValueAxis* values = nullptr;
    };

    bool same_shape(const BreakdownData& data) const {
        if (!stack_ || stack_->count() != data.segment_names.size()) return false;
        for (int s = 0; s < stack_->count(); ++s)
            if (stack_->barSets()[s]->count() != data.bars.size() || stack_->barSets()[s]->label() != data.segment_names[s])
                return false;
        return true;
    }

    void rebuild(const BreakdownData& data) {
        stack_ = new QHorizontalStackedBarSeries;
        stack_->setObjectName("gpuBreakdown");
        for (const QString& name : data.segment_names) {
            auto* set = new QBarSet(name);
            for (int b = 0; b < data.bars.size(); ++b) set->append(0);
            stack_->append(set);
        }
        hosts_ = new QHorizontalBarSeries;
        hosts_->setObjectName("hostMemory");
        auto* hset = new QBarSet("host RAM per node (GiB)");
        for (int b = 0; b < data.bars.size(); ++b) hset->append(0);
        hosts_->append(hset);
        gpu_axes_ = fill(gpu_->chart(), stack_, "GiB per GPU (2^30 bytes)");
        host_axes_ = fill(host_->chart(), hosts_, "GiB per node");
    }

    static void set_axes(const Axes& a, const QStringList& cats, double max) {
        if (a.cats->categories() != cats) a.cats->setCategories(cats);
        a.values->setRange(0, max > 0 ? max * 1.05 : 1);
        a.values->applyNiceNumbers();
    }

    static Axes fill(QChart* chart, QAbstractBarSeries* series, const QString& unit) {
        chart->removeAllSeries();
        for (QAbstractAxis* a : chart->axes()) {
            chart->removeAxis(a);
            delete a;
        }
        chart->addSeries(series);
        Axes a{new QBarCategoryAxis, new QValueAxis};
        a.values->setTitleText(unit);
        a.values->setLabelFormat("%.0f");
        chart->addAxis(a.cats, Qt::AlignLeft);
        chart->addAxis(a.values, Qt::AlignBottom);
        series->attachAxis(a.cats);
        series->attachAxis(a.values);
        return a;
    }

    QHorizontalStackedBarSeries* stack_ = nullptr;
    QHorizontalBarSeries* hosts_ = nullptr;
    Axes gpu_axes_, host_axes_;
    QWidget* box_ = nullptr;
    QChartView *gpu_ = nullptr, *host_ = nullptr;
};

/// Allocated and reserved memory (GiB) against the event index on a
/// QChartView, one translucent QAreaSeries per phase band behind them (one
/// legend entry per phase name), the peak allocated point labelled; a QLabel
/// above shows the note, or the message instead of the chart.
class QtTimelineChart final : public TimelineChart {
public:
    explicit QtTimelineChart(QWidget* parent) {
        box_ = new QWidget(parent);
        box_->setObjectName("timeline");
        auto* lay = new QVBoxLayout(box_);
        label_ = new QLabel(box_);
        label_->setObjectName("timelineMessage");
        label_->setTextFormat(Qt::PlainText);
        label_->setWordWrap(true);
        label_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
        chart_ = new QChart;
        view_ = new QChartView(chart_, box_);
        view_->setObjectName("timelineChartView");
        view_->setRenderHint(QPainter::Antialiasing);
        chart_->legend()->setAlignment(Qt::AlignRight);  // a column: phase names stay whole
        x_ = new QValueAxis;
        y_ = new QValueAxis;
        x_->setTitleText("event index (one unit per allocation or free; simulated time)");
        y_->setTitleText("GiB per GPU (2^30 bytes)");
        x_->setLabelFormat("%.0f");
        y_->setLabelFormat("%.1f");
        chart_->addAxis(x_, Qt::AlignBottom);
        chart_->addAxis(y_, Qt::AlignLeft);
        lay->addWidget(label_);
        lay->addWidget(view_, 1);
    }

    QWidget* widget() override { return box_; }

    void setData(const TimelineData& data) override {
        chart_->removeAllSeries();  // deletes the old series; bands change with every option
        chart_->setTitle(data.title);
        if (!data.message.isEmpty()) {
            label_->setText(data.message);
            view_->hide();
            return;
        }
        label_->setText(data.note);
        view_->show();
        double xmax = 1, ymax = 0;
        for (const QPointF& p : data.reserved + data.allocated) {
            xmax = std::max(xmax, p.x());
            ymax = std::max(ymax, p.y());
        }
        x_->setRange(0, xmax);  // the run ends at the right edge; ticks at a round interval
        x_->setTickType(QValueAxis::TicksDynamic);
        x_->setTickAnchor(0);
        x_->setTickInterval(round_interval(xmax / 6));
        y_->setRange(0, ymax > 0 ? ymax * 1.15 : 1);
        y_->applyNiceNumbers();
        add_bands(data.bands, y_->max());  // first, so the lines are drawn over them
        auto* reserved = add_series<QLineSeries>("reserved", "reserved (GiB)");
        reserved->replace(data.reserved);
        reserved->setPen(QPen(QColor(214, 39, 40), 1.5));
        auto* allocated = add_series<QLineSeries>("allocated", "allocated (GiB)");
        allocated->replace(data.allocated);
        allocated->setPen(QPen(QColor(31, 119, 180), 1.5));
        auto* peak = add_series<QScatterSeries>("peakAllocated", "peak allocated");
        if (!data.allocated.isEmpty()) peak->append(data.peak);
        peak->setMarkerSize(10);
        peak->setColor(Qt::black);
        peak->setPointLabelsFormat(QString(data.peak_label).replace('@', ' '));  // '@' would start a placeholder
        peak->setPointLabelsVisible(true);
        peak->setPointLabelsClipping(false);
    }

    QImage image() override { return view_->grab().toImage(); }

private:
    /// The smallest 1, 2 or 5 x 10^k at least `v` (tick spacing for the axis labels).
    static double round_interval(double v) {
        if (v <= 1) return 1;
        const double p = std::pow(10.0, std::floor(std::log10(v)));
        for (double m : {1.0, 2.0, 5.0})
            if (m * p >= v) return m * p;
        return 10 * p;
    }

    template <class Series>
    Series* add_series(const char* object_name, const QString& name) {
        auto* s = new Series;
        s->setObjectName(object_name);
        s->setName(name);
        chart_->addSeries(s);
        s->attachAxis(x_);
        s->attachAxis(y_);
        return s;
    }

    /// One area per band from 0 to `top` GiB; the legend names each phase once.
    void add_bands(const QVector<TimelineBand>& bands, double top) {
        static const QColor palette[] = {QColor(148, 103, 189), QColor(44, 160, 44),  QColor(255, 127, 14),
                                         QColor(140, 86, 75),   QColor(23, 190, 207), QColor(188, 189, 34),
                                         QColor(127, 127, 127)};
        std::map<QString, QColor> colour;
        for (const TimelineBand& b : bands) {
            const bool first = colour.find(b.phase) == colour.end();
            if (first) colour[b.phase] = palette[colour.size() % (sizeof palette / sizeof palette[0])];
            auto* upper = new QLineSeries;
            auto* lower = new QLineSeries;
            upper->append({QPointF(b.begin, top), QPointF(b.end, top)});
            lower->append({QPointF(b.begin, 0), QPointF(b.end, 0)});
            auto* area = new QAreaSeries(upper, lower);
            area->setObjectName("phase:" + b.phase);
            area->setName(b.phase);
            chart_->addSeries(area);
            area->attachAxis(x_);
            area->attachAxis(y_);
            QColor fill = colour[b.phase];
            fill.setAlpha(45);
            area->setBrush(fill);
            area->setPen(Qt::NoPen);
            if (!first)
                for (QLegendMarker* m : chart_->legend()->markers(area)) m->setVisible(false);
        }
    }

    QWidget* box_ = nullptr;
    QLabel* label_ = nullptr;
    QChart* chart_ = nullptr;
    QChartView* view_ = nullptr;
    QValueAxis *x_ = nullptr, *y_ = nullptr;
};

}  // namespace

std::unique_ptr<SpeedMemoryChart> make_speed_memory_chart(QWidget* parent) {
    return std::make_unique<QtSpeedMemoryChart>(parent);
}

std::unique_ptr<BreakdownChart> make_breakdown_chart(QWidget* parent) {
    return std::make_unique<QtBreakdownChart>(parent);
}

std::unique_ptr<TimelineChart> make_timeline_chart(QWidget* parent) {
    return std::make_unique<QtTimelineChart>(parent);
}

}  // namespace zeromem_gui
