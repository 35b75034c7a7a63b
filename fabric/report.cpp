#include "fabric/report.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

namespace rocemu::fabric {

Recorder::Recorder(const Fabric& f, std::string prefix) : f_(f), prefix_(std::move(prefix)), t0_(f.now()) {}

double trailing_gbps(const std::vector<Nanos>& times, Nanos t0, std::size_t r, std::size_t window,
                     const std::function<uint64_t(std::size_t row)>& bytes) {
    const bool from_start = r < window;
    const double dt = (times[r] - (from_start ? t0 : times[r - window])).seconds();
    const uint64_t b = bytes(r) - (from_start ? 0 : bytes(r - window));
    return dt > 0 ? static_cast<double>(b) * 8 / dt / 1e9 : 0.0;
}

double Recorder::flow_rate(std::size_t i, std::size_t f) const {
    return trailing_gbps(times_, t0_, i, 1, [&](std::size_t row) { return rx_[row][f]; });
}

Recorder::Series& Recorder::series(std::vector<Series>& s, std::size_t i, const std::string& name) {
    if (s.size() <= i) s.resize(i + 1);
    if (s[i].name.empty()) s[i].name = name;
    return s[i];
}

void Recorder::sample(Nanos now) {
    std::vector<uint64_t>& rx = rx_.emplace_back(f_.stats().size());
    for (std::size_t i = 0; i < rx.size(); ++i) rx[i] = f_.stats()[i].rx_bytes;
    times_.push_back(now);

    const int q = f_.data_queue();
    std::size_t qi = 0, pi = 0;
    for (const auto& s : f_.switches()) {
        const sw::Switch& core = s->core();
        for (std::size_t p = 0; p < core.num_ports(); ++p, ++qi, ++pi) {
            const auto port = static_cast<sw::PortId>(p);
            const std::string name = fmt::format("{}:{}", s->name(), core.config().ports[p].name);
            Series& qs = series(queues_, qi, name);
            const double depth = static_cast<double>(core.queue_depth(port, q).v);
            qs.v.push_back(depth);
            qs.nonzero |= depth > 0;
            Series& ps = series(pauses_, pi, name);
            const bool paused = core.queue_paused(port, q, now);
            ps.v.push_back(paused);
            ps.nonzero |= paused;
        }
    }
    for (uint32_t n = 0; n < f_.nic_count(); ++n) {
        Series& ps = series(pauses_, pi++, f_.topology().nics[n].name);
        const bool paused = f_.nic_paused(n, now);
        ps.v.push_back(paused);
        ps.nonzero |= paused;
    }
    const Totals t = f_.totals();
    totals_.push_back({t.cnps, t.ecn_marks, t.pfc_frames});
}

double Recorder::deepest_mean_queue() const {
    double best = 0;
    for (const Series& s : queues_) {
        if (!s.nonzero || s.v.empty()) continue;
        double sum = 0;
        for (const double d : s.v) sum += d;
        best = std::max(best, sum / static_cast<double>(s.v.size()));
    }
    return best;
}

void write_wide(const std::string& path, const std::vector<Nanos>& times, const std::vector<std::string>& names,
                const std::function<double(std::size_t row, std::size_t col)>& value) {
    std::ofstream out(path);
    out << "time_us";
    for (const auto& n : names) out << ',' << n;
    out << '\n';
    for (std::size_t r = 0; r < times.size(); ++r) {
        out << fmt::format("{:.3f}", times[r].us());
        for (std::size_t c = 0; c < names.size(); ++c) out << fmt::format(",{:.6g}", value(r, c));
        out << '\n';
    }
}

// gnuplot reads the CSV once per line it draws, so hundreds of series (the
// 992 flows of a 32-NIC all-to-all) took minutes and drew an unreadable
// plot: at most kPlotted are drawn, the title says so, the CSV has them all.
// It also splits every column of every line it reads: the 65280 flows of a
// 256-NIC all-to-all took it 50 s for 32 lines, so a wider CSV is read
// through `cut`, which hands it only the columns drawn (0.3 s).
constexpr std::size_t kPlotted = 32;

void write_plot_script(const std::string& path, const std::string& xlabel, const std::vector<PlotSpec>& plots) {
    std::ofstream gp(path);
    gp << "set terminal svg size 1000,500 dynamic noenhanced\nset datafile separator ','\nset key outside right\n"
       << fmt::format("set xlabel '{}'\nset grid\n", xlabel);
    for (const PlotSpec& p : plots) {
        if (p.columns == 0) continue;
        const std::size_t drawn = std::min(p.columns, kPlotted);
        const std::string of =
            drawn < p.columns ? fmt::format(" (first {} of {}, all in {})", drawn, p.columns, p.csv) : "";
        gp << fmt::format("set output '{}'\nset title \"{}{}\"\nset ylabel '{}'\n", p.svg, p.title, of, p.ylabel);
        const std::string source =
            drawn < p.columns ? fmt::format("< cut -d, -f1,{}-{} {}", p.first, p.first + drawn - 1, p.csv) : p.csv;
        const std::size_t first = drawn < p.columns ? 2 : p.first;
        gp << fmt::format("plot for [i={}:{}] '{}' using 1:i with {} title columnheader(i)\n", first,
                          first + drawn - 1, source, p.steps ? "steps" : "lines");
    }
}

std::vector<std::string> Recorder::write(const std::string& dir) const {
    std::filesystem::create_directories(dir);
    std::vector<std::string> files;
    auto path = [&](const std::string& what) { return fmt::format("{}/{}_{}", dir, prefix_, what); };

    std::vector<std::string> flow_names;
    for (std::size_t i = 0; i < f_.flows().size(); ++i) {
        const FlowSpec& fl = f_.flows()[i];
        flow_names.push_back(
            fmt::format("f{}_{}-{}", i, f_.topology().nics[fl.src].name, f_.topology().nics[fl.dst].name));
    }
    write_wide(path("flows.csv"), times_, flow_names, [&](std::size_t r, std::size_t c) {
        return trailing_gbps(times_, t0_, r, kRateSamples, [&](std::size_t row) { return rx_[row][c]; });
    });
    files.push_back(path("flows.csv"));

    auto write_series = [&](const std::vector<Series>& all, const std::string& what) {
        std::vector<const Series*> used;
        std::vector<std::string> names;
        for (const Series& s : all)
            if (s.nonzero) {
                used.push_back(&s);
                names.push_back(s.name);
            }
        write_wide(path(what), times_, names, [&](std::size_t r, std::size_t c) { return used[c]->v[r]; });
        files.push_back(path(what));
        return names.size();
    };
    const std::size_t nq = write_series(queues_, "queues.csv");
    const std::size_t np = write_series(pauses_, "pfc.csv");
    write_wide(path("totals.csv"), times_, {"cnps", "ecn_marks", "pfc_frames"},
               [&](std::size_t r, std::size_t c) { return static_cast<double>(totals_[r][c]); });
    files.push_back(path("totals.csv"));

    const std::string base = fmt::format("{}_", prefix_);
    write_plot_script(
        path("plots.gp"), "virtual time (us)",
        {{base + "flows.csv", base + "flows.svg",
          fmt::format("{}: per-flow goodput, mean of {} samples", prefix_, kRateSamples), "Gbit/s", flow_names.size()},
         {base + "queues.csv", base + "queues.svg", prefix_ + ": data queue depth", "bytes", nq},
         {base + "pfc.csv", base + "pfc.svg", prefix_ + ": PFC pause state (1 = paused)", "paused", np, true},
         {base + "totals.csv", base + "totals.svg", prefix_ + ": cumulative CNPs, ECN marks, PFC frames", "count", 3}});
    files.push_back(path("plots.gp"));
    return files;
}

bool render_plots(const std::string& dir, std::vector<std::string>& files, std::string& message) {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        message = "gnuplot not found: CSVs written, plots skipped (scripts are in the report folder)";
        return false;
    }
    const std::size_t written = files.size();
    for (std::size_t i = 0; i < written; ++i) {
        const std::filesystem::path path(files[i]);
        if (path.extension() != ".gp") continue;
        const std::string cmd = fmt::format("cd '{}' && gnuplot '{}' 2>/dev/null", dir, path.filename().string());
        if (std::system(cmd.c_str()) != 0) {
            message = fmt::format("gnuplot failed on {}", files[i]);
            return false;
        }
        // The plots are the script's `set output '...'` lines (write_plot_script).
        std::ifstream gp(path);
        constexpr std::string_view kOutput = "set output '";
        for (std::string line; std::getline(gp, line);)
            if (line.starts_with(kOutput) && line.back() == '\'') {
                const std::string svg = line.substr(kOutput.size(), line.size() - kOutput.size() - 1);
                const std::filesystem::path at = std::filesystem::path(dir) / svg;
                if (std::filesystem::exists(at)) files.push_back(at.string());
            }
    }
    message = "plots rendered as SVG";
    return true;
}

namespace {

// `path` relative to `dir`, or empty when it is not inside it.
std::string inside(const std::filesystem::path& dir, const std::string& path) {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::weakly_canonical(dir, ec);
    if (ec) return {};
    const std::filesystem::path full = std::filesystem::weakly_canonical(path, ec);
    if (ec) return {};
    const std::filesystem::path rel = full.lexically_relative(base);
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..") return {};
    return rel.generic_string();
}

// A manifest line names a file in the folder: relative, no "..".
bool listable(const std::string& line) {
    if (line.empty()) return false;
    const std::filesystem::path p(line);
    if (p.is_absolute()) return false;
    for (const auto& part : p)
        if (part == ".." || part == ".") return false;
    return true;
}

std::vector<std::string> read_manifest(const std::filesystem::path& at) {
    std::vector<std::string> lines;
    std::ifstream in(at);
    for (std::string line; std::getline(in, line);)
        if (listable(line)) lines.push_back(line);
    return lines;
}

bool write_manifest(const std::filesystem::path& at, std::vector<std::string> listed, std::string& error) {
    std::sort(listed.begin(), listed.end());
    listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
    std::ofstream out(at, std::ios::trunc);
    for (const std::string& l : listed) out << l << '\n';
    out.close();
    if (!out) {
        error = fmt::format("cannot write {}", at.string());
        return false;
    }
    return true;
}

std::vector<std::string> relative_to(const std::string& dir, const std::vector<std::string>& files) {
    std::vector<std::string> rel;
    for (const std::string& f : files)
        if (std::string r = inside(dir, f); !r.empty() && r != kReportManifest) rel.push_back(std::move(r));
    return rel;
}

}  // namespace

std::optional<std::size_t> replace_report(const std::string& dir, const std::vector<std::string>& files,
                                          std::string& error) {
    if (dir.empty()) return 0;
    const std::filesystem::path at = std::filesystem::path(dir) / kReportManifest;
    std::vector<std::string> now = relative_to(dir, files);
    std::sort(now.begin(), now.end());
    std::size_t removed = 0;
    std::error_code ec;
    for (const std::string& l : read_manifest(at)) {
        if (std::binary_search(now.begin(), now.end(), l)) continue;
        const std::filesystem::path p = std::filesystem::path(dir) / l;
        // A regular file, reached without a symbolic link on the way.
        if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(p, ec)) || inside(dir, p.string()) != l)
            continue;
        if (!std::filesystem::remove(p, ec) || ec) {
            error = fmt::format("cannot remove {} (a file of the folder's previous report): {}", p.string(),
                                ec ? ec.message() : "not removed");
            return std::nullopt;
        }
        ++removed;
    }
    if (now.empty()) {
        std::filesystem::remove(at, ec);
        return removed;
    }
    if (!write_manifest(at, std::move(now), error)) return std::nullopt;
    return removed;
}

bool record_report(const std::string& dir, const std::vector<std::string>& files, std::string& error) {
    if (dir.empty() || files.empty()) return true;
    const std::filesystem::path at = std::filesystem::path(dir) / kReportManifest;
    std::vector<std::string> listed = read_manifest(at);
    const std::vector<std::string> more = relative_to(dir, files);
    listed.insert(listed.end(), more.begin(), more.end());
    return write_manifest(at, std::move(listed), error);
}

double jain(const std::vector<double>& x) {
    double s = 0, s2 = 0;
    for (const double v : x) {
        s += v;
        s2 += v * v;
    }
    return s2 > 0 ? s * s / (static_cast<double>(x.size()) * s2) : 1.0;
}

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> w;
    for (const auto& r : rows)
        for (std::size_t c = 0; c < r.size(); ++c) {
            if (w.size() <= c) w.push_back(0);
            w[c] = std::max(w[c], r[c].size());
        }
    std::string out;
    for (const auto& r : rows) {
        for (std::size_t c = 0; c < r.size(); ++c)
            out += fmt::format("{:>{}}{}", r[c], w[c], c + 1 == r.size() ? "" : "  ");
        out += '\n';
    }
    return out;
}

}  // namespace rocemu::fabric
