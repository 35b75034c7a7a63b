#include "cc/sim/bottleneck.hpp"

#include <algorithm>
#include <deque>
#include <fstream>

#include "cc/sim/host_side.hpp"
#include "common/rng.hpp"

namespace rocemu::cc::sim {

using detail::Ev;
using detail::HostSide;

BottleneckResult Bottleneck::run() {
    return cfg_.fabric == Fabric::kSoftSwitch ? run_soft_switch() : run_marking_queue();
}

BottleneckResult Bottleneck::run_marking_queue() {
    BottleneckResult res;
    HostSide hosts(cfg_, res);
    Rng rng(cfg_.seed);
    const Bytes pkt = cfg_.packet_bytes;
    const Nanos host_ser = cfg_.link_rate.serialise(pkt);
    struct Queued {
        int flow;
        bool ce;
    };
    std::deque<Queued> queue;
    Bytes qbytes{0};
    bool busy = false;
    bool xoff_sent = false;
    Nanos last_q_change{0};

    auto account_queue = [&](Nanos now) {
        if (qbytes > cfg_.pfc_xoff) res.time_above_pfc_xoff += now - last_q_change;
        last_q_change = now;
    };
    auto start_tx = [&](Nanos now) {
        busy = true;
        hosts.push(now + cfg_.link_rate.serialise(pkt), Ev::Depart, queue.front().flow, queue.front().ce);
    };
    auto pause_all = [&](Nanos at, uint64_t duration) {
        for (int i = 0; i < cfg_.flows; ++i) hosts.push(at, Ev::Pause, i, duration);
    };

    Nanos now{0};
    while (!hosts.empty()) {
        const detail::Event e = hosts.pop();
        if (e.t > cfg_.duration) break;
        now = e.t;
        switch (e.kind) {
            case Ev::Arrive: {
                // RED on the queue length the arriving packet sees; data is ECT(0).
                double p = 0;
                if (qbytes > cfg_.kmax)
                    p = 1;
                else if (qbytes > cfg_.kmin)
                    p = cfg_.pmax * static_cast<double>(qbytes.v - cfg_.kmin.v) /
                        static_cast<double>(cfg_.kmax.v - cfg_.kmin.v);
                const bool ce = p >= 1 || rng.chance(p);
                res.ce_marked += ce;
                account_queue(now);
                queue.push_back({e.flow, ce});
                qbytes += pkt;
                res.max_queue = std::max(res.max_queue, qbytes);
                if (!xoff_sent && qbytes >= cfg_.pfc_xoff) {
                    xoff_sent = true;
                    ++res.pfc_pauses;
                    res.last_xoff = now;
                    pause_all(now + cfg_.link_delay, detail::kPauseUntilResumed);
                }
                if (!busy) start_tx(now);
                break;
            }
            case Ev::Depart:
                account_queue(now);
                queue.pop_front();
                qbytes -= pkt;
                busy = false;
                if (xoff_sent && qbytes <= cfg_.pfc_xon) {
                    xoff_sent = false;
                    pause_all(now + cfg_.link_delay, 0);
                }
                hosts.push(now + cfg_.link_delay, Ev::Receive, e.flow, e.arg);
                if (!queue.empty()) start_tx(now);
                break;
            default:
                if (hosts.handle(e, qbytes)) hosts.push(now + host_ser + cfg_.link_delay, Ev::Arrive, e.flow, 0);
                break;
        }
    }
    hosts.finish(cfg_.duration);
    return res;
}

double jain_index(const std::vector<double>& x) {
    double sum = 0, sq = 0;
    for (double v : x) {
        sum += v;
        sq += v * v;
    }
    return sq == 0 ? 0 : sum * sum / (static_cast<double>(x.size()) * sq);
}

WindowStats window_stats(const BottleneckConfig& cfg, const BottleneckResult& r, Nanos from, Nanos to) {
    WindowStats w;
    std::vector<double> per_flow(cfg.flows, 0.0);
    double total_bits = 0, q_sum = 0;
    int n = 0, in_band = 0, above = 0;
    for (const Sample& s : r.samples) {
        // A sample's throughput covers the interval that ends at s.t.
        if (s.t - cfg.sample_interval < from || s.t > to) continue;
        ++n;
        for (int i = 0; i < cfg.flows; ++i) per_flow[i] += s.throughput_gbps[i];
        for (double g : s.throughput_gbps) total_bits += g * static_cast<double>(cfg.sample_interval.v);
        q_sum += static_cast<double>(s.queue.v);
        w.max_queue_bytes = std::max(w.max_queue_bytes, static_cast<double>(s.queue.v));
        in_band += s.queue >= cfg.kmin && s.queue <= cfg.kmax;
        above += s.queue > cfg.kmax;
    }
    if (n == 0) return w;
    w.jain = jain_index(per_flow);
    w.utilisation = total_bits / (static_cast<double>(cfg.link_rate.v) * 1e-9 * n * static_cast<double>(cfg.sample_interval.v));
    w.mean_queue_bytes = q_sum / n;
    w.frac_in_band = static_cast<double>(in_band) / n;
    w.frac_above_kmax = static_cast<double>(above) / n;
    return w;
}

Nanos convergence_time(const BottleneckConfig& cfg, const BottleneckResult& r, Nanos window, double jain_min,
                       double util_min) {
    Nanos converged = Nanos::max();
    for (Nanos t{0}; t + window <= cfg.duration; t += window) {
        const WindowStats w = window_stats(cfg, r, t, t + window);
        const bool ok = w.jain >= jain_min && w.utilisation >= util_min;
        if (!ok) converged = Nanos::max();
        else if (converged == Nanos::max()) converged = t;
    }
    return converged;
}

bool write_csv(const BottleneckResult& r, const std::string& path) {
    std::ofstream out(path);
    if (!out) return false;
    const std::size_t n = r.samples.empty() ? 0 : r.samples.front().rate_gbps.size();
    out << "time_us,queue_kb";
    for (std::size_t i = 0; i < n; ++i) out << ",rate" << i << "_gbps";
    for (std::size_t i = 0; i < n; ++i) out << ",tput" << i << "_gbps";
    out << '\n';
    for (const Sample& s : r.samples) {
        out << s.t.us() << ',' << static_cast<double>(s.queue.v) / 1024;
        for (double v : s.rate_gbps) out << ',' << v;
        for (double v : s.throughput_gbps) out << ',' << v;
        out << '\n';
    }
    return static_cast<bool>(out);
}

}  // namespace rocemu::cc::sim
