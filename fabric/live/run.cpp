// The live sweep: one fabric, one workload per size, nccl-tests' columns
// scaled back to the configured rates, PFC/ECN/CNP totals, CSV report.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "common/rng.hpp"
#include "fabric/live/live.hpp"
#include "fabric/live/live_fabric.hpp"
#include "fabric/live/split.hpp"
#include "fabric/report.hpp"

namespace rocemu::fabric::live {

namespace {

std::string human_bytes(uint64_t b) {
    if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ull << 30));
    if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1ull << 20));
    if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / (1ull << 10));
    return fmt::format("{} B", b);
}

std::vector<FlowSpec> flows_for(const Topology& t, Pattern p, Bytes size, uint64_t seed) {
    Rng rng(seed);
    Workload w;
    w.pattern = p;
    w.size = size;
    w.incast_target = t.nic_count() - 1;
    return make_flows(t, w, rng);
}

// Writes `lines` to dir/name and records the file.
void write_csv(const std::string& dir, const std::string& name, const std::vector<std::string>& lines,
               std::vector<std::string>& files) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream f(path);
    for (const std::string& l : lines) f << l << '\n';
    if (f) files.push_back(path);
}

// The time series virtual time writes too, in fabric time scaled back:
// per-flow goodput (bytes the receiving QPs executed, the mean of the trailing
// Recorder::kRateSamples samples), the data queue of every switch port that
// held any, the share of each sample each port's data queue was paused by
// PFC (for those ever paused), and a gnuplot script drawing them and the
// totals.
void write_series(const Topology& topo, const std::vector<FlowSpec>& flows, const std::vector<Sample>& samples,
                  double scale, const std::string& dir, const std::string& prefix, std::vector<std::string>& files) {
    const auto path = [&](const char* what) { return (std::filesystem::path(dir) / (prefix + what)).string(); };
    std::vector<Nanos> times;
    for (const Sample& s : samples) times.push_back(Nanos{static_cast<int64_t>(static_cast<double>(s.at.v) / scale)});
    std::vector<std::string> flow_names;
    for (size_t i = 0; i < flows.size(); ++i)
        flow_names.push_back(fmt::format("f{}_{}-{}", i, topo.nics[flows[i].src].name, topo.nics[flows[i].dst].name));
    write_wide(path("_rates.csv"), times, flow_names, [&](size_t r, size_t c) {
        return trailing_gbps(times, Nanos{0}, r, Recorder::kRateSamples,
                             [&](size_t row) { return samples[row].flow_bytes[c]; });
    });
    files.push_back(path("_rates.csv"));
    // Columns: the ports in the order they first show up.
    std::vector<std::string> depth_ports, paused_ports;
    std::map<std::string, size_t> depth_col, paused_col;
    for (const Sample& s : samples)
        for (const QueueSample& q : s.queues) {
            if (q.depth_bytes && depth_col.emplace(q.port, depth_ports.size()).second) depth_ports.push_back(q.port);
            if (q.paused_ns && paused_col.emplace(q.port, paused_ports.size()).second) paused_ports.push_back(q.port);
        }
    std::vector<std::vector<double>> depth(samples.size(), std::vector<double>(depth_ports.size()));
    std::vector<std::vector<double>> paused(samples.size(), std::vector<double>(paused_ports.size()));
    std::vector<uint64_t> last_paused(paused_ports.size());
    for (size_t r = 0; r < samples.size(); ++r) {
        const Nanos dt = r ? samples[r].at - samples[r - 1].at : Nanos{0};
        for (const QueueSample& q : samples[r].queues) {
            if (const auto d = depth_col.find(q.port); d != depth_col.end())
                depth[r][d->second] = static_cast<double>(q.depth_bytes);
            if (const auto p = paused_col.find(q.port); p != paused_col.end()) {
                const uint64_t held = q.paused_ns - last_paused[p->second];
                last_paused[p->second] = q.paused_ns;
                paused[r][p->second] = dt.v > 0 ? std::min(1.0, static_cast<double>(held) / static_cast<double>(dt.v)) : 0;
            }
        }
    }
    write_wide(path("_queues.csv"), times, depth_ports, [&](size_t r, size_t c) { return depth[r][c]; });
    write_wide(path("_pfc.csv"), times, paused_ports, [&](size_t r, size_t c) { return paused[r][c]; });
    files.push_back(path("_queues.csv"));
    files.push_back(path("_pfc.csv"));
    write_plot_script(
        path("_plots.gp"), "fabric time, scaled back (us)",
        {{prefix + "_rates.csv", prefix + "_rates.svg",
          fmt::format("{}: per-flow goodput, mean of {} samples", prefix, Recorder::kRateSamples), "Gbit/s",
          flow_names.size()},
         {prefix + "_queues.csv", prefix + "_queues.svg", prefix + ": data queue depth", "bytes", depth_ports.size()},
         {prefix + "_pfc.csv", prefix + "_pfc.svg", prefix + ": share of each sample paused by PFC", "paused",
          paused_ports.size(), true},
         {prefix + "_totals.csv", prefix + "_totals.svg", prefix + ": cumulative PFC frames, ECN marks, CNPs, drops",
          "count", 4, false, 3}});
    files.push_back(path("_plots.gp"));
}

}  // namespace

LiveResult run_live_sweep(const Topology& topo, Pattern p, std::span<const Bytes> sizes, const LiveOptions& o) {
    LiveResult res;
    res.sizes = sizes.size();
    res.ranks = collective_ranks(topo);
    res.scale = o.scale > 0 ? o.scale : default_scale(topo);
    Topology live;
    try {
        live = scale_topology(topo, res.scale,
                              o.split.nic_devspecs.empty() ? kLiveHeadroomFrames : split_headroom_frames());
    } catch (const std::invalid_argument& e) {
        res.error = e.what();
        return res;
    }
    if (o.qps_per_flow < 1 || o.qps_per_flow > 64) {
        res.error = fmt::format("--qps {}: must be in [1, 64]", o.qps_per_flow);
        return res;
    }
    if (!o.out_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(o.out_dir, ec);
        if (ec) {
            res.error = fmt::format("-o {}: {}", o.out_dir, ec.message());
            return res;
        }
    }
    LiveOptions opts = o;
    if (!o.pcap_link.empty()) {
        res.error = topo.pcap_link_error(o.pcap_link);
        if (!res.error.empty()) return res;
        if (opts.pcap_path.empty() && o.out_dir.empty()) {
            res.error = "--pcap needs a report folder (-o DIR)";
            return res;
        }
        if (opts.pcap_path.empty())
            opts.pcap_path = (std::filesystem::path(o.out_dir) /
                              fmt::format("live_{}_{}.pcap", pattern_name(p), o.pcap_link)).string();
    }
    std::string error;
    // Building and connecting end early, with an error, when a stop is
    // heard: then it is the stop, in the first size, not an error.
    const auto failed = [&] {
        if (o.stop && o.stop() && !sizes.empty())
            res.stopped_in = sizes.front();
        else
            res.error = error;
        return res;
    };
    std::unique_ptr<LiveFabric> fab = LiveFabric::build(live, opts, res.scale, error);
    if (!fab) return failed();
    res.fabric_up = true;
    if (fab->clock_jumped() > Nanos{})
        res.notes.push_back(fmt::format("fabric clock: jumped {:.1f} ms ahead to the switch nodes' time, which ran "
                                        "before they heard of this node",
                                        fab->clock_jumped().seconds() * 1e3));
    const sw::SwitchConfig& c0 = live.switches.front().cfg;
    res.notes.push_back(fmt::format(
        "scale 1:{:g}: host links {:g} Mbit/s, fabric links {:g} Mbit/s, delays x{:g}; lossless headroom (xoff) {} B",
        res.scale, live.cfg.host_link.speed.as_mbps(), live.cfg.fabric_link.speed.as_mbps(), res.scale,
        c0.pg_lossless.xoff.v));

    std::vector<std::string> sweep_csv{
        "size_bytes,time_us,algbw_gbs,busbw_gbs,live_time_us,pfc,ecn,cnp,drops,lossless_drops,flows,verified,"
        "mismatched,complete,scale,nic_drops"};
    const double busbw_f = busbw_factor(p, res.ranks);
    // Every size's QPs at once: the ACK timeout covers the busiest NIC's
    // window over all of them, and a QP keeps the timeout it was made with.
    std::vector<std::vector<FlowSpec>> flows_of;
    std::vector<FlowSpec> every_flow;
    for (const Bytes size : sizes) {
        flows_of.push_back(flows_for(topo, p, size, o.seed));
        every_flow.insert(every_flow.end(), flows_of.back().begin(), flows_of.back().end());
    }
    if (!fab->connect(every_flow, error)) return failed();
    res.rc_timeout = fab->rc_timeout();
    const Nanos rto = rc_timeout_time(res.rc_timeout);
    res.notes.push_back(
        o.rc_timeout ? fmt::format("RC ACK timeout {} ({:.3f} s, as given) on every QP", res.rc_timeout, rto.seconds())
                     : fmt::format("RC ACK timeout {} ({:.3f} s) on every QP: at least twice the round-trip bound {:.3f} "
                                   "s (full queues, full NIC window) plus {:.0f} ms for scheduling gaps",
                                   res.rc_timeout, rto.seconds(), fab->rtt_bound().seconds(),
                                   kSchedulingSlack.seconds() * 1e3));
    for (size_t i = 0; i < sizes.size(); ++i) {
        const Bytes size = sizes[i];
        const std::vector<FlowSpec>& flows = flows_of[i];
        const std::vector<std::string> ports_before = fab->switch_port_rows(true);
        const std::vector<std::string> nics_before = fab->nic_rows();
        const LiveTotals before = fab->totals(ports_before);
        std::vector<Sample> samples;
        const auto tick = [&](Nanos t, uint64_t done, uint64_t total) {
            if (o.stop && o.stop()) return true;
            if (!o.progress) return false;
            const LiveTotals now = fab->totals() - before;
            o.progress(fmt::format("live {} {}: {} of {} ({:.0f}%) {:.1f} s, pfc {} ecn {} cnp {} drops {}, turn {:.1f} us",
                                   pattern_name(p), human_bytes(size.v), human_bytes(done), human_bytes(total),
                                   total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                                   t.seconds(), now.pfc_frames, now.ecn_marks, now.cnps,
                                   now.switch_drops + now.nic_drops, fab->mean_turn().us()));
            return false;
        };
        const WorkloadResult w = fab->run(flows, Nanos::from_s(o.timeout_s), Nanos::from_ms(250), tick,
                                          Nanos::from_ms(10), samples);
        if (w.stopped) {
            res.stopped_in = size;
            break;
        }
        std::vector<std::string> ports_after = fab->switch_port_rows(true);
        const LiveTotals d = fab->totals(ports_after) - before;
        LiveRow row;
        row.live_time = w.time;
        row.complete = w.complete;
        row.flows = w.flows.size();
        row.bad_completions = w.bad_completions;
        row.lossless_drops = d.lossless_drops;
        uint64_t rx = 0;
        for (const FlowResult& f : w.flows) {
            rx += f.bytes;
            if (f.verified == 1) ++row.verified;
            if (f.verified == 0) ++row.mismatched;
        }
        SweepRow& r = row.row;
        r.size = size;
        r.time = Nanos{static_cast<int64_t>(static_cast<double>(w.time.v) / res.scale)};
        const double secs = r.time.seconds();
        const double moved = p == Pattern::Incast ? static_cast<double>(rx) : static_cast<double>(size.v);
        r.algbw_gbs = secs > 0 ? moved / secs / 1e9 : 0;
        r.busbw_gbs = r.algbw_gbs * busbw_f;
        r.pfc = d.pfc_frames;
        r.ecn = d.ecn_marks;
        r.cnp = d.cnps;
        r.drops = d.switch_drops + d.nic_drops;
        row.nic_drops = d.nic_drops;
        res.rows.push_back(row);
        res.notes.push_back(fmt::format(
            "{}: loop turn mean {:.2f} us, max {:.0f} us; fabric clock held back {:.1f} ms over {} scheduling gaps{}{}",
            human_bytes(size.v), fab->mean_turn().us(), fab->max_turn().us(), w.held_back.seconds() * 1e3,
            w.held_back_turns,
            !o.split.clock ? (o.split.nic_devspecs.empty() ? "" : ", not shared with the switch nodes")
                           : fmt::format(", {:.1f} ms waiting for the switch nodes", w.waited.seconds() * 1e3),
            w.error.empty() ? "" : "; " + w.error));
        if (r.drops) {
            // Where and why, adding up to the drops column.
            std::vector<DropCount> why = drops_between("switch", ports_before, ports_after);
            for (DropCount& c : drops_between("nic", nics_before, fab->nic_rows())) why.push_back(std::move(c));
            res.notes.push_back(fmt::format("{}: drops: {}", human_bytes(size.v),
                                            why.empty() ? "(none named)" : format_drop_counts(why)));
        }
        sweep_csv.push_back(fmt::format("{},{:.3f},{:.4f},{:.4f},{:.3f},{},{},{},{},{},{},{},{},{},{:g},{}", size.v,
                                        r.time.us(), r.algbw_gbs, r.busbw_gbs, w.time.us(), r.pfc, r.ecn, r.cnp,
                                        r.drops, row.lossless_drops, row.flows, row.verified, row.mismatched,
                                        row.complete ? 1 : 0, res.scale, row.nic_drops));
        if (o.out_dir.empty()) continue;
        // As each size finishes: a run killed later keeps these rows.
        std::vector<std::string> listed_at_the_end;
        write_csv(o.out_dir, fmt::format("live_{}_sweep.csv", pattern_name(p)), sweep_csv, listed_at_the_end);
        const std::string prefix = fmt::format("live_{}_{}B", pattern_name(p), size.v);
        std::vector<std::string> fl{"flow,src,dst,bytes,first_post_us,last_cqe_us,goodput_gbps,done,verified"};
        for (size_t i = 0; i < w.flows.size(); ++i) {
            const FlowResult& f = w.flows[i];
            const double span = f.done && f.last_cqe > f.first_post ? (f.last_cqe - f.first_post).seconds() : 0;
            // Goodput scaled back: the live rate times the scale.
            const double gbps = span > 0 ? static_cast<double>(f.bytes) * 8 / span / 1e9 * res.scale : 0;
            fl.push_back(fmt::format("{},{},{},{},{:.3f},{:.3f},{:.3f},{},{}", i, topo.nics[f.src].name,
                                     topo.nics[f.dst].name, f.bytes,
                                     f.first_post == Nanos::max() ? -1.0 : f.first_post.us() / res.scale,
                                     f.last_cqe.us() / res.scale, gbps, f.done ? 1 : 0, f.verified));
        }
        write_csv(o.out_dir, prefix + "_flows.csv", fl, res.files);
        std::vector<std::string> ts{"time_us,bytes_done,pfc,ecn,cnp,drops"};
        for (const Sample& s : samples) {
            const LiveTotals x = s.totals - before;
            ts.push_back(fmt::format("{:.3f},{},{},{},{},{}", s.at.us() / res.scale, s.bytes, x.pfc_frames,
                                     x.ecn_marks, x.cnps, x.switch_drops + x.nic_drops));
        }
        write_csv(o.out_dir, prefix + "_totals.csv", ts, res.files);
        write_series(topo, flows, samples, res.scale, o.out_dir, prefix, res.files);
        std::vector<std::string> ports{"switch,port,counter,value"};
        for (std::string& l : ports_after) ports.push_back(std::move(l));
        write_csv(o.out_dir, prefix + "_switch_ports.csv", ports, res.files);
        std::vector<std::string> nics{"nic,counter,value"};
        for (std::string& l : fab->nic_rows()) nics.push_back(std::move(l));
        write_csv(o.out_dir, prefix + "_nics.csv", nics, res.files);
    }
    if (!o.out_dir.empty()) write_csv(o.out_dir, fmt::format("live_{}_sweep.csv", pattern_name(p)), sweep_csv, res.files);
    if (const std::optional<uint64_t> frames = fab->captured_frames()) {
        if (std::string why; !fab->flush_capture(why) && res.error.empty())
            res.error = fmt::format("--pcap {}: {}: {}", o.pcap_link, opts.pcap_path, why);
        fab.reset();  // closes the capture
        res.notes.push_back(fmt::format("pcap: {} frames of link {} received by its ends here in {}", *frames,
                                        o.pcap_link, opts.pcap_path));
        if (o.pcap_path.empty()) res.files.push_back(opts.pcap_path);
    }
    return res;
}

std::string format_live_sweep(Pattern p, const LiveResult& r) {
    std::vector<std::vector<std::string>> t;
    t.push_back({"size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "live time (ms)", "#pfc", "#ecn", "#cnp",
                 "#drops", "verified"});
    for (const LiveRow& row : r.rows) {
        const SweepRow& s = row.row;
        t.push_back({fmt::format("{}", s.size.v), fmt::format("{:.1f}", s.time.us()),
                     fmt::format("{:.2f}", s.algbw_gbs), fmt::format("{:.2f}", s.busbw_gbs),
                     fmt::format("{:.1f}", row.live_time.seconds() * 1e3), fmt::format("{}", s.pfc),
                     fmt::format("{}", s.ecn), fmt::format("{}", s.cnp), fmt::format("{}", s.drops),
                     row.complete ? fmt::format("{}/{}", row.verified, row.flows) : "INCOMPLETE"});
    }
    return fmt::format("# {} (live, scale 1:{:g}; time, algbw and busbw scaled back to the configured link rates)\n{}",
                       pattern_name(p), r.scale, format_table(t));
}

}  // namespace rocemu::fabric::live
