// What a run leaves behind: time series sampled from a Fabric (per-flow rate,
// queue depth per queue, PFC pause state, CNP/ECN/PFC totals) written as CSV
// files, gnuplot SVG plots of them, and plain-text tables.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric.hpp"

namespace rocemu::fabric {

class Recorder {
public:
    // Samples `f`; `prefix` names the files (e.g. "ecmp" -> ecmp_flows.csv).
    Recorder(const Fabric& f, std::string prefix);

    void sample(Nanos now);

    // Writes <prefix>_flows.csv (per-flow goodput, Gbit/s, the mean over the
    // trailing kRateSamples samples), _queues.csv
    // (bytes in every data queue that ever held any), _pfc.csv (1 while a
    // switch queue or NIC is paused, for those ever paused), _totals.csv
    // (cumulative CNPs, ECN marks, PFC frames), and a gnuplot script
    // rendering each to SVG. Returns the files written.
    std::vector<std::string> write(const std::string& dir) const;

    // flows.csv's rates are means over this many samples: over one 10 us
    // sample a flow with a 3 Gbit/s share (32 flows into 100 Gbit/s) gets 0
    // or 1 packet of 4 KiB, so its rate would read 0, 3.3 or 6.6.
    static constexpr std::size_t kRateSamples = 8;

    std::size_t samples() const { return times_.size(); }
    // Goodput of flow f in sample i (Gbit/s over the preceding interval).
    double flow_rate(std::size_t i, std::size_t f) const;
    Nanos time(std::size_t i) const { return times_[i]; }
    // The largest time-averaged depth of any data queue (bytes).
    double deepest_mean_queue() const;

private:
    struct Series {
        std::string name;
        std::vector<double> v;
        bool nonzero = false;
    };
    Series& series(std::vector<Series>& s, std::size_t i, const std::string& name);

    const Fabric& f_;
    std::string prefix_;
    std::vector<Nanos> times_;
    std::vector<std::vector<uint64_t>> rx_;  // [sample][flow]: FlowStats::rx_bytes
    Nanos t0_{};
    std::vector<Series> queues_, pauses_;
    std::vector<std::array<uint64_t, 3>> totals_;  // cnps, ecn marks, pfc frames
};

// Gbit/s from cumulative byte counts `bytes(row)` sampled at `times`, over
// the `window` samples up to row r: from row r - window, or from the start
// (`t0`, 0 bytes) when there is no such row.
double trailing_gbps(const std::vector<Nanos>& times, Nanos t0, std::size_t r, std::size_t window,
                     const std::function<uint64_t(std::size_t row)>& bytes);

// A CSV of one row per sample: time_us, then one column per name.
void write_wide(const std::string& path, const std::vector<Nanos>& times, const std::vector<std::string>& names,
                const std::function<double(std::size_t row, std::size_t col)>& value);

// One plot of such a CSV: its columns first..first+columns-1 (1-based, as
// gnuplot counts; column 1 is the time), at most 32 of them drawn (the
// title says so; gnuplot reads the CSV once per line it draws, and a wider
// CSV through `cut -d, -f1,FIRST-LAST`, as it splits every column it reads).
struct PlotSpec {
    std::string csv, svg;  // names in the script's folder
    std::string title, ylabel;
    std::size_t columns = 0;  // 0: nothing to plot, the plot is left out
    bool steps = false;
    std::size_t first = 2;
};
// Writes a gnuplot script drawing each plot as an SVG.
void write_plot_script(const std::string& path, const std::string& xlabel, const std::vector<PlotSpec>& plots);

// Renders the *.gp scripts among `files` (a run's report files, in `dir`)
// with gnuplot if it is installed, and adds the plots drawn to `files`; other
// files of the folder, e.g. an earlier run's, are left alone. Returns false
// (with a message) if gnuplot is missing or failed.
bool render_plots(const std::string& dir, std::vector<std::string>& files, std::string& message);

// A report folder's manifest: the files rocemu runs wrote there, one path a
// line relative to the folder, in `dir`/.rocemu-report (hidden: `ls` shows
// the report alone). A run's report replaces the one before it: what the
// manifest lists and the run did not write again (another size's CSVs, a
// PFC plot this run has no pauses for) is removed when the run ends, so it
// never sits beside the new report; files rocemu did not write are left
// alone, and a run refused before it writes anything changes nothing.
inline constexpr const char* kReportManifest = ".rocemu-report";

// Removes the regular files the manifest lists that are not among `files`
// (paths in `dir`, as the writers named them; those outside it are left
// out), then lists `files` alone. A manifest line naming an absolute path, a
// path with "..", a folder, a symbolic link or a path through one removes
// nothing. Returns how many files it removed; nullopt, with `error`, if one
// cannot be removed or the manifest cannot be written.
std::optional<std::size_t> replace_report(const std::string& dir, const std::vector<std::string>& files,
                                          std::string& error);

// Adds `files` to the manifest, keeping what it lists (a file written after
// the run's report, such as a merged capture). False, with `error`, if the
// manifest cannot be written.
bool record_report(const std::string& dir, const std::vector<std::string>& files, std::string& error);

// Jain's fairness index of the values: 1 = perfectly fair, 1/n = one takes all.
double jain(const std::vector<double>& x);

// Pads columns to a table: rows[0] is the header.
std::string format_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace rocemu::fabric
