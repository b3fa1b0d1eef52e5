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
#include <QGraphicsLineItem>
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

/// The smallest 1, 2 or 5 x 10^k at least `v` (tick spacing for axis labels).
double round_interval(double v) {
    if (v <= 0) return 1;
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 5.0})
        if (m * p >= v) return m * p;
    return 10 * p;
}

/// Room right of the largest fitting peak (or the capacity line, whichever is further right) on the
/// speed-memory chart's x axis: 20 % leaves space for the point labels and the pinned off-scale markers.
constexpr double kFrameMargin = 1.2;
/// Where an off-scale option is drawn: just inside the right edge, so its marker is not cut in half.
constexpr double kPinned = 0.99;

/// The label of an option beyond the axis: its value, since its marker is pinned at the edge.
QString off_scale_label(const QString& label, double gib) {
    return QObject::tr("%1 (off scale: %2 GiB)").arg(label).arg(gib, 0, 'f', 0);
}

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
        offscale_ = add_series<QScatterSeries>("offscale");
        ring_ = add_series<QScatterSeries>("selected");
        style_series();
        for (QScatterSeries* s : {fits_, tight_, hollow_, offscale_, ring_}) {
            connect(s, &QScatterSeries::clicked, this, [this](const QPointF& p) { on_click(p); });
            connect(s, &QScatterSeries::hovered, this, [this](const QPointF& p, bool on) { on_hover(p, on); });
        }
        connect(chart_, &QChart::plotAreaChanged, this, [this](const QRectF&) { place_labels(); });
    }

    QWidget* widget() override { return view_; }

    void setData(const SpeedMemoryData& data) override {
        data_ = data;
        chart_->setTitle(data.title);
        // The x axis frames the options that fit and the capacity line; an option that does not fit beyond
        // that is pinned at the right edge (its label gives its value), so ZeRO-0's hundreds of GiB do not
        // squeeze every option that fits into the left of the picture.
        double fit_max = 0, all_max = 0, ymax = 0;
        for (const OptionPoint& p : data.points) {
            all_max = std::max(all_max, p.memory_gib);
            if (p.fits) fit_max = std::max(fit_max, p.memory_gib);
            ymax = std::max(ymax, p.tokens_per_s);
        }
        double frame = std::max(data.capacity_gib, fit_max);
        if (frame <= 0) frame = all_max;
        if (frame <= 0) frame = 1;
        const double xmax = std::min(frame * kFrameMargin, std::max(frame, all_max) * 1.05);
        if (ymax <= 0) ymax = 1;
        x_->setRange(0, xmax);
        x_->setTickType(QValueAxis::TicksDynamic);
        x_->setTickAnchor(0);
        x_->setTickInterval(round_interval(xmax / 8));
        y_->setRange(0, ymax * 1.12);
        y_->applyNiceNumbers();
        QList<QPointF> in, tight, out, off, path;
        drawn_.clear();
        for (const OptionPoint& p : data.points) {
            const bool pinned = p.memory_gib > xmax;
            const QPointF at(pinned ? xmax * kPinned : p.memory_gib, p.tokens_per_s);
            drawn_.append(at);
            (pinned ? off : !p.fits ? out : p.tight ? tight : in).append(at);
        }
        for (int i : data.ordering_path) path.append(drawn_[i]);
        fits_->replace(in);
        tight_->replace(tight);
        hollow_->replace(out);
        offscale_->replace(off);
        offscale_->setName(tr("off scale"));
        outline_hollow_markers();
        path_->replace(path);
        path_->setName(data.ordering_name);
        capacity_->replace({QPointF(data.capacity_gib, 0), QPointF(data.capacity_gib, y_->max())});
        capacity_->setName(QString("capacity %1 GiB").arg(data.capacity_gib, 0, 'f', 1));
        make_labels(xmax);
        setSelected(selected_ < int(data.points.size()) ? selected_ : -1);
    }

    void setSelected(int index) override {
        selected_ = index;
        if (index >= 0 && index < int(data_.points.size()))
            ring_->replace({drawn_[index]});
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
        fits_->setName("fits");
        fits_->setMarkerSize(11);
        fits_->setColor(blue);
        fits_->setBorderColor(blue);
        const QColor orange(255, 127, 14);
        tight_->setName("tight");
        tight_->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
        tight_->setMarkerSize(11);
        tight_->setColor(orange);
        tight_->setBorderColor(orange);
        hollow_->setName("does not fit");
        hollow_->setMarkerSize(11);
        hollow_->setBrush(QBrush(Qt::transparent));
        hollow_->setPen(QPen(QColor(214, 39, 40), 2));
        offscale_->setMarkerShape(QScatterSeries::MarkerShapeTriangle);
        offscale_->setMarkerSize(13);
        offscale_->setBrush(QBrush(Qt::transparent));
        offscale_->setPen(QPen(QColor(214, 39, 40), 2));
        ring_->setName("selected");
        ring_->setMarkerSize(22);
        ring_->setBrush(QBrush(Qt::transparent));
        ring_->setPen(QPen(Qt::black, 2));
        capacity_->setPen(QPen(QColor(214, 39, 40), 2, Qt::DashLine));
        path_->setPen(QPen(QColor(120, 120, 120), 1.5, Qt::DotLine));
    }

    // The hollow series (does not fit, off scale, selected) draw no fill, and a legend marker shows only the
    // fill: each marker takes its series' outline colour instead, so the legend keys are not blank squares.
    void outline_hollow_markers() {
        for (QScatterSeries* s : {hollow_, offscale_, ring_})
            for (QLegendMarker* m : chart_->legend()->markers(s)) {
                m->setBrush(QBrush(Qt::white));
                m->setPen(s->pen());
            }
    }

    void make_labels(double xmax) {
        for (QGraphicsSimpleTextItem* l : labels_) delete l;
        for (QGraphicsLineItem* l : leaders_) delete l;
        labels_.clear();
        leaders_.clear();
        for (const OptionPoint& p : data_.points) {
            const QString text = p.memory_gib > xmax ? off_scale_label(p.label, p.memory_gib) : p.label;
            auto* item = new QGraphicsSimpleTextItem(text, chart_);
            item->setData(0, QStringLiteral("pointLabel"));
            item->setZValue(20);
            labels_.append(item);
            auto* leader = new QGraphicsLineItem(chart_);  // from the point to its label when moved away
            leader->setPen(QPen(QColor(150, 150, 150), 1));
            leader->setZValue(19);
            leaders_.append(leader);
        }
        place_labels();
    }

    /// Puts each label beside its point inside the plot area: right of it, else left of it, moved up or down
    /// in line steps until it overlaps no label placed before it (options often share a spot); a label that
    /// finds no free spot keeps the first one, still inside the plot area.
    void place_labels() {
        const QRectF area = chart_->plotArea();
        QVector<QRectF> placed;  // the markers first, so no label covers a point
        for (const QPointF& v : drawn_) placed.append(QRectF(chart_->mapToPosition(v, capacity_) - QPointF(6, 6), QSizeF(12, 12)));
        for (int i = 0; i < labels_.size() && i < drawn_.size(); ++i) {
            const QPointF at = chart_->mapToPosition(drawn_[i], capacity_);
            const QSizeF box = labels_[i]->boundingRect().size();
            auto inside = [&](QPointF pos) {
                pos.setX(std::clamp(pos.x(), area.left(), std::max(area.left(), area.right() - box.width())));
                pos.setY(std::clamp(pos.y(), area.top(), std::max(area.top(), area.bottom() - box.height())));
                return pos;
            };
            const QPointF right = at + QPointF(9, -box.height() / 2), left = at - QPointF(9 + box.width(), box.height() / 2);
            const bool fits_right = right.x() + box.width() <= area.right();
            QPointF chosen = inside(fits_right ? right : left);
            bool found = false;
            for (int step = 0; step < 25 && !found; ++step) {
                const double dy = (step % 2 ? 1 : -1) * ((step + 1) / 2) * box.height();  // 0, +1, -1, +2, ...
                for (const QPointF& side : fits_right ? QList<QPointF>{right, left} : QList<QPointF>{left, right}) {
                    const QPointF pos = inside(side + QPointF(0, dy));
                    const QRectF r(pos, box);
                    if (std::none_of(placed.begin(), placed.end(), [&r](const QRectF& q) { return q.intersects(r); })) {
                        chosen = pos;
                        found = true;
                        break;
                    }
                }
            }
            labels_[i]->setPos(chosen);
            placed.append(QRectF(chosen, box));
            const QRectF r(chosen, box);
            const QPointF end(r.left() > at.x() ? r.left() : r.right(), r.center().y());
            leaders_[i]->setLine(QLineF(at, end));
            leaders_[i]->setVisible(std::abs(r.center().y() - at.y()) > 0.75 * box.height());
        }
    }

    /// The point nearest `p` in screen space (the series hold exact values).
    int index_of(const QPointF& p) const {
        int best = -1;
        double best_d = 0;
        for (int i = 0; i < drawn_.size(); ++i) {
            const QPointF a = chart_->mapToPosition(drawn_[i], capacity_);
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
    QScatterSeries *fits_ = nullptr, *tight_ = nullptr, *hollow_ = nullptr, *offscale_ = nullptr, *ring_ = nullptr;
    QLineSeries *capacity_ = nullptr, *path_ = nullptr;
    QVector<QGraphicsSimpleTextItem*> labels_;
    QVector<QGraphicsLineItem*> leaders_;  ///< one per label, shown when the label sits away from its point
    SpeedMemoryData data_;
    QVector<QPointF> drawn_;  ///< where each point is drawn: its value, or pinned at the right edge
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
        host_->chart()->setTitle("Host RAM / node");  // short: the narrow chart keeps it whole
        // The host bars share the rows of the per-GPU bars (same title, axis and no bottom legend in both, so
        // the plot areas line up) and leave the option names to them: the narrow chart shows whole bars.
        host_->chart()->legend()->hide();
        gpu_->chart()->legend()->setAlignment(Qt::AlignRight);
        QFont small = gpu_->chart()->legend()->font();
        small.setPointSizeF(small.pointSizeF() * 0.9);  // a narrower legend leaves the row labels whole
        gpu_->chart()->legend()->setFont(small);
        lay->addWidget(gpu_, 4);
        lay->addWidget(host_, 1);
    }

    QWidget* widget() override { return box_; }

    void setData(const BreakdownData& data) override {
        // The per-GPU axis frames the bars that fit and the capacity line (as the speed-memory chart does);
        // a longer bar runs to the edge and its row label gives its length.
        double fit_max = 0, all_max = 0, host_max = data.host_capacity_gib;
        QVector<double> sums;
        for (const BreakdownBar& b : data.bars) {
            double sum = 0;
            for (double v : b.segments_gib) sum += v;  // bar length, to size the axis
            sums.append(sum);
            all_max = std::max(all_max, sum);
            if (data.capacity_gib <= 0 || sum <= data.capacity_gib) fit_max = std::max(fit_max, sum);
            host_max = std::max(host_max, b.host_gib);
        }
        const double frame = std::max(data.capacity_gib, fit_max);
        const double gpu_max = frame > 0 ? std::min(frame * kFrameMargin, std::max(frame, all_max) * 1.05) : 1;
        QStringList cats;
        for (int i = 0; i < data.bars.size(); ++i) {
            const QString& label = data.bars[i].label;
            // first option on top; a bar that runs off the axis gives its length
            cats.prepend(sums[i] > gpu_max ? tr("%1 (%2 GiB)").arg(label).arg(sums[i], 0, 'f', 0) : label);
        }
        if (!same_shape(data)) rebuild(data);
        // Update values in place: rebuilding the series costs ~10 ms a change.
        const int n = int(data.bars.size());
        for (int s = 0; s < data.segment_names.size(); ++s)
            for (int b = 0; b < n; ++b) stack_->barSets()[s]->replace(b, data.bars[n - 1 - b].segments_gib.value(s));
        for (int b = 0; b < n; ++b) hosts_->barSets()[0]->replace(b, data.bars[n - 1 - b].host_gib);
        set_axes(gpu_axes_, cats, gpu_max, false);
        set_axes(host_axes_, cats, host_max * 1.05, true);
        host_axes_.values->setTitleText(data.host_capacity_gib > 0
                                            ? tr("GiB per node<br>usable %1").arg(data.host_capacity_gib, 0, 'f', 0)
                                            : tr("GiB per node<br>RAM unknown"));
        set_line(gpu_cap_, data.capacity_gib, n, tr("GPU capacity (%1 GiB)"));
        set_line(host_cap_, data.host_capacity_gib, n, tr("usable host RAM per node (%1 GiB)"));
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
        // Two-line axis titles in both charts keep their plot areas, and so the rows, lined up.
        gpu_axes_ = fill(gpu_->chart(), stack_, "GiB per GPU (2^30 bytes)<br>dashed: the GPU's capacity");
        host_axes_ = fill(host_->chart(), hosts_, "GiB per node");
        gpu_cap_ = add_line(gpu_->chart(), gpu_axes_, "gpuCapacity");
        host_cap_ = add_line(host_->chart(), host_axes_, "hostCapacity");
        host_axes_.cats->setLabelsVisible(false);  // the per-GPU chart's rows name the options
    }

    static void set_axes(const Axes& a, const QStringList& cats, double max, bool nice) {
        if (a.cats->categories() != cats) a.cats->setCategories(cats);
        a.values->setRange(0, max > 0 ? max : 1);
        a.values->setTickType(QValueAxis::TicksDynamic);
        a.values->setTickAnchor(0);
        a.values->setTickInterval(round_interval(a.values->max() / (nice ? 4 : 8)));
    }

    /// A dashed vertical line at `gib` across the `n` bars (a category axis spans -0.5 .. n - 0.5); no
    /// points and no legend entry when `gib` is 0 (not known).
    static void set_line(QLineSeries* line, double gib, int n, const QString& name) {
        if (gib > 0)
            line->replace({QPointF(gib, -0.5), QPointF(gib, n - 0.5)});
        else
            line->clear();
        line->setName(name.arg(gib, 0, 'f', 1));
        if (QChart* c = line->chart())
            for (QLegendMarker* m : c->legend()->markers(line)) m->setVisible(gib > 0);
    }

    static QLineSeries* add_line(QChart* chart, const Axes& a, const char* name) {
        auto* line = new QLineSeries;
        line->setObjectName(name);
        chart->addSeries(line);
        line->attachAxis(a.values);
        line->attachAxis(a.cats);
        line->setPen(QPen(QColor(214, 39, 40), 2, Qt::DashLine));
        return line;
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
    QLineSeries *gpu_cap_ = nullptr, *host_cap_ = nullptr;
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
        label_->setAlignment(Qt::AlignLeft | Qt::AlignTop);  // a message in place of the chart reads from the top
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
        x_->setTickInterval(std::max(1.0, round_interval(xmax / 6)));
        const double top = std::max(ymax, data.capacity_gib);  // the capacity line stays in view
        y_->setRange(0, top > 0 ? top * 1.1 : 1);
        y_->applyNiceNumbers();
        add_bands(data.bands, y_->max());  // first, so the lines are drawn over them
        auto* reserved = add_series<QLineSeries>("reserved", "reserved (GiB)");
        reserved->replace(data.reserved);
        reserved->setPen(QPen(QColor(214, 39, 40), 1.5));
        auto* allocated = add_series<QLineSeries>("allocated", "allocated (GiB)");
        allocated->replace(data.allocated);
        allocated->setPen(QPen(QColor(31, 119, 180), 1.5));
        if (data.capacity_gib > 0) {
            auto* cap = add_series<QLineSeries>("capacity", tr("GPU capacity (%1 GiB)").arg(data.capacity_gib, 0, 'f', 1));
            cap->replace({QPointF(0, data.capacity_gib), QPointF(xmax, data.capacity_gib)});
            cap->setPen(QPen(QColor(120, 0, 0), 2, Qt::DashLine));  // darker than the reserved line
        }
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
