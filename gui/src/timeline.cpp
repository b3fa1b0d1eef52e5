// Timeline display logic (see timeline.h).
#include "timeline.h"

#include <algorithm>

namespace zeromem_gui {

namespace {

/// Bytes to GiB (2^30 bytes) for display.
double gib(uint64_t bytes) { return double(bytes) / 1073741824.0; }

}  // namespace

QVector<QPointF> decimate_keep_max(const QVector<QPointF>& points, int max_points) {
    const int n = int(points.size());
    max_points = std::max(max_points, 4);
    if (n <= max_points) return points;
    const int buckets = (max_points - 2) / 2;  // two points left for the first and the last
    QVector<QPointF> out;
    out.reserve(2 * buckets + 2);
    out.append(points.front());
    for (int b = 0; b < buckets; ++b) {
        // Bucket b holds points [begin, end): the n points split as evenly as integers allow.
        const int begin = int(int64_t(n) * b / buckets), end = int(int64_t(n) * (b + 1) / buckets);
        if (begin >= end) continue;
        int lo = begin, hi = begin;
        for (int i = begin + 1; i < end; ++i) {
            if (points[i].y() < points[lo].y()) lo = i;
            if (points[i].y() > points[hi].y()) hi = i;
        }
        const int first = std::min(lo, hi), second = std::max(lo, hi);  // in x order
        if (first != 0 && first != n - 1) out.append(points[first]);
        if (second != first && second != n - 1) out.append(points[second]);
    }
    out.append(points.back());
    return out;
}

QVector<TimelineBand> phase_bands(const std::vector<zeromem::sim::TimelinePoint>& timeline) {
    QVector<TimelineBand> bands;
    for (size_t i = 0; i < timeline.size(); ++i) {
        const auto& p = timeline[i];
        if (i > 0 && p.phase == timeline[i - 1].phase) continue;
        if (!bands.isEmpty()) bands.back().end = double(p.t);
        bands.append({QString::fromUtf8(zeromem::sim::to_string(p.phase)), double(p.t), double(p.t)});
    }
    if (!bands.isEmpty()) bands.back().end = double(timeline.back().t);
    return bands;
}

TimelineData timeline_data(const zeromem::sim::SimResult& r, const QString& title) {
    TimelineData d;
    d.title = title;
    QVector<QPointF> allocated, reserved;
    allocated.reserve(int(r.timeline.size()));
    reserved.reserve(int(r.timeline.size()));
    for (const auto& p : r.timeline) {
        allocated.append(QPointF(double(p.t), gib(p.allocated)));
        reserved.append(QPointF(double(p.t), gib(p.reserved)));
    }
    d.events = int64_t(r.timeline.size());
    d.allocated = decimate_keep_max(allocated, kTimelineMaxPoints);
    d.reserved = decimate_keep_max(reserved, kTimelineMaxPoints);
    d.bands = phase_bands(r.timeline);
    if (!r.timeline.empty()) {
        d.peak = QPointF(double(r.peak_allocated_t), gib(r.peak_allocated));
        d.peak_label = QString("peak allocated %1 GiB at event %2: %3 in %4")
                           .arg(gib(r.peak_allocated), 0, 'f', 2)
                           .arg(qulonglong(r.peak_allocated_t))
                           .arg(QString::fromStdString(r.peak_event), QString::fromStdString(r.peak_module));
    }
    return d;
}

}  // namespace zeromem_gui
