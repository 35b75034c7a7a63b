#include "cc/sim/bottleneck.hpp"

#include <algorithm>
#include <deque>
#include <fstream>
#include <queue>

#include "cc/cc.hpp"
#include "cc/dcqcn_np.hpp"
#include "common/rng.hpp"

namespace rocemu::cc::sim {
namespace {

enum class Ev : uint8_t { Send, Timer, Arrive, Depart, Receive, Cnp, Sample, PauseOn, PauseOff };

struct Event {
    Nanos t;
    uint64_t seq;
    Ev kind;
    int flow;
    uint64_t arg;  // generation for Send/Timer, CE bit for Arrive/Receive
};

struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
};

struct Flow {
    QpCc cc;
    NpQpState np;
    Nanos start;
    uint64_t send_gen = 0;
    uint64_t timer_gen = 0;
    Nanos send_at = Nanos::max();
    Nanos timer_at = Nanos::max();
    uint64_t interval_bytes = 0;
};

struct Queued {
    int flow;
    bool ce;
};

}  // namespace

BottleneckResult Bottleneck::run() {
    BottleneckResult res;
    res.flows.resize(cfg_.flows);
    Rng rng(cfg_.seed);
    DcqcnNp np(cfg_.cc.dcqcn);
    std::vector<Flow> flows;
    flows.reserve(cfg_.flows);
    for (int i = 0; i < cfg_.flows; ++i)
        flows.push_back(Flow{QpCc(cfg_.cc, cfg_.link_rate), NpQpState{Qpn{static_cast<uint32_t>(i + 1)}},
                             cfg_.flow_start_gap * i});

    std::priority_queue<Event, std::vector<Event>, Later> evq;
    bool senders_paused = false;  // as seen at the senders, one link delay after the switch decides
    bool xoff_sent = false;
    Nanos paused_since{0};
    uint64_t seq = 0;
    auto push = [&](Nanos t, Ev k, int f, uint64_t arg) { evq.push(Event{t, seq++, k, f, arg}); };

    // Pending Send/Timer events are superseded, not removed: each carries the
    // generation it was scheduled under and is ignored once that changed.
    auto reschedule = [&](int i, Nanos now) {
        Flow& f = flows[i];
        const Nanos s = senders_paused ? Nanos::max() : std::max({f.cc.next_send_time(), f.start, now});
        if (s != f.send_at && s == Nanos::max()) {
            f.send_at = s;
            ++f.send_gen;
        } else if (s != f.send_at) {
            f.send_at = s;
            push(s, Ev::Send, i, ++f.send_gen);
        }
        const Nanos tm = f.cc.next_timer();
        if (tm != f.timer_at) {
            f.timer_at = tm;
            if (tm != Nanos::max()) push(std::max(tm, now), Ev::Timer, i, ++f.timer_gen);
        }
    };

    const Bytes pkt = cfg_.packet_bytes;
    const Nanos host_ser = cfg_.link_rate.serialise(pkt);
    std::deque<Queued> queue;
    Bytes qbytes{0};
    bool busy = false;
    Nanos last_q_change{0};

    auto account_queue = [&](Nanos now) {
        if (qbytes > cfg_.pfc_xoff) res.time_above_pfc_xoff += now - last_q_change;
        last_q_change = now;
    };
    auto start_tx = [&](Nanos now) {
        busy = true;
        push(now + cfg_.link_rate.serialise(pkt), Ev::Depart, queue.front().flow, queue.front().ce);
    };

    for (int i = 0; i < cfg_.flows; ++i) reschedule(i, Nanos{0});
    push(Nanos{0}, Ev::Sample, 0, 0);

    while (!evq.empty()) {
        const Event e = evq.top();
        evq.pop();
        if (e.t > cfg_.duration) break;
        const Nanos now = e.t;
        switch (e.kind) {
            case Ev::Send: {
                Flow& f = flows[e.flow];
                if (e.arg != f.send_gen) break;
                f.send_at = Nanos::max();
                f.cc.on_tx(pkt, now);
                push(now + host_ser + cfg_.link_delay, Ev::Arrive, e.flow, 0);
                reschedule(e.flow, now);
                break;
            }
            case Ev::Timer: {
                Flow& f = flows[e.flow];
                if (e.arg != f.timer_gen) break;
                f.timer_at = Nanos::max();
                f.cc.on_timer(now);
                reschedule(e.flow, now);
                break;
            }
            case Ev::Arrive: {
                // RED on the queue length the arriving packet sees; data is ECT(0).
                double p = 0;
                if (qbytes > cfg_.kmax) p = 1;
                else if (qbytes > cfg_.kmin)
                    p = cfg_.pmax * static_cast<double>(qbytes.v - cfg_.kmin.v) / static_cast<double>(cfg_.kmax.v - cfg_.kmin.v);
                const bool ce = p >= 1 || rng.chance(p);
                res.ce_marked += ce;
                account_queue(now);
                queue.push_back(Queued{e.flow, ce});
                qbytes += pkt;
                res.max_queue = std::max(res.max_queue, qbytes);
                if (!xoff_sent && qbytes >= cfg_.pfc_xoff) {
                    xoff_sent = true;
                    ++res.pfc_pauses;
                    res.last_xoff = now;
                    push(now + cfg_.link_delay, Ev::PauseOn, 0, 0);
                }
                if (!busy) start_tx(now);
                break;
            }
            case Ev::Depart: {
                account_queue(now);
                queue.pop_front();
                qbytes -= pkt;
                busy = false;
                if (xoff_sent && qbytes <= cfg_.pfc_xon) {
                    xoff_sent = false;
                    push(now + cfg_.link_delay, Ev::PauseOff, 0, 0);
                }
                push(now + cfg_.link_delay, Ev::Receive, e.flow, e.arg);
                if (!queue.empty()) start_tx(now);
                break;
            }
            case Ev::Receive: {
                Flow& f = flows[e.flow];
                f.interval_bytes += pkt.v;
                res.flows[e.flow].delivered_bytes += pkt.v;
                if (e.arg != 0 && cfg_.cc.algorithm == CcAlgorithm::kDcqcn) {
                    if (np.on_ce_packet(f.np, now)) {
                        ++res.cnps_sent;
                        push(now + cfg_.cnp_delay, Ev::Cnp, e.flow, 0);
                    }
                }
                break;
            }
            case Ev::Cnp: {
                flows[e.flow].cc.on_cnp(now);
                ++res.flows[e.flow].cnps_received;
                reschedule(e.flow, now);
                break;
            }
            case Ev::PauseOn: {
                senders_paused = true;
                paused_since = now;
                for (int i = 0; i < cfg_.flows; ++i) reschedule(i, now);
                break;
            }
            case Ev::PauseOff: {
                senders_paused = false;
                res.time_paused += now - paused_since;
                for (int i = 0; i < cfg_.flows; ++i) reschedule(i, now);
                break;
            }
            case Ev::Sample: {
                Sample s{now, qbytes, {}, {}};
                for (Flow& f : flows) {
                    s.rate_gbps.push_back(now >= f.start ? f.cc.rate().as_gbps() : 0.0);
                    s.throughput_gbps.push_back(static_cast<double>(f.interval_bytes) * 8 /
                                                static_cast<double>(cfg_.sample_interval.v));
                    f.interval_bytes = 0;
                }
                res.samples.push_back(std::move(s));
                push(now + cfg_.sample_interval, Ev::Sample, 0, 0);
                break;
            }
        }
    }
    if (senders_paused) res.time_paused += cfg_.duration - paused_since;
    for (int i = 0; i < cfg_.flows; ++i) res.flows[i].rate_decreases = flows[i].cc.counters().rate_decreases;
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
