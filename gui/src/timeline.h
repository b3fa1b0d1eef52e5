// The timeline tab's display logic: the simulator's result (bytes, one row
// per event) turned into what TimelineChart draws (GiB, at most a few
// thousand points, one band per run of equal phases). No memory arithmetic:
// every number is the simulator's, converted to GiB (2^30 bytes).
#pragma once

#include "charts.h"

#include "zeromem/simulator.h"

#include <QPointF>
#include <QVector>

namespace zeromem_gui {

/// Most points one timeline series keeps (decimate_keep_max's budget).
constexpr int kTimelineMaxPoints = 4000;

/// Reduces `points` (x increasing) to at most `max_points` (>= 4) points:
/// the first and the last point, and, with the points cut into
/// (max_points - 2) / 2 buckets of consecutive points, each bucket's lowest
/// and highest point, in x order, so every bucket's maximum (and the global
/// peak) is kept exactly. Returns `points` unchanged when it has at most
/// max_points points. Display logic only.
QVector<QPointF> decimate_keep_max(const QVector<QPointF>& points, int max_points);

/// One band per run of consecutive timeline rows with the same phase: the
/// band spans from its first row's event index to the next band's first
/// event index (the last band ends at the last row's index). Empty for an
/// empty timeline.
QVector<TimelineBand> phase_bands(const std::vector<zeromem::sim::TimelinePoint>& timeline);

/// What the timeline chart draws for `r` (from zeromem::sim::simulate):
/// allocated and reserved memory after each event in GiB against the event
/// index, decimated to kTimelineMaxPoints each; phase bands; the peak
/// allocated point with its event and module. `title` is the chart title.
TimelineData timeline_data(const zeromem::sim::SimResult& r, const QString& title);

}  // namespace zeromem_gui
