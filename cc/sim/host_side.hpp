// The sender and receiver hosts shared by the bottleneck models: one QpCc per
// flow paced by its reaction point, the receiver's notification point, CNP
// feedback, per-sender PFC pause, sampling, and the event queue they run on.
// Internal to cc/sim.
#pragma once

#include <algorithm>
#include <queue>
#include <vector>

#include "cc/cc.hpp"
#include "cc/dcqcn_np.hpp"
#include "cc/sim/bottleneck.hpp"

namespace rocemu::cc::sim::detail {

// Host events plus the ones each fabric model defines for itself.
enum class Ev : uint8_t { Send, Timer, Receive, Cnp, Pause, Sample, Arrive, Depart, FabricTx, FabricTimer };

struct Event {
    Nanos t;
    uint64_t seq;
    Ev kind;
    int flow;
    uint64_t arg;  // Send/Timer: generation; Arrive/Receive: CE bit or handle; Pause: duration in ns
};

// A Pause event with this duration holds the sender until one with 0 arrives.
inline constexpr uint64_t kPauseUntilResumed = UINT64_MAX;

struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
};

class HostSide {
public:
    HostSide(const BottleneckConfig& cfg, BottleneckResult& res) : cfg_(cfg), res_(res), np_(cfg.cc.dcqcn) {
        res_.flows.resize(cfg.flows);
        flows_.reserve(cfg.flows);
        for (int i = 0; i < cfg.flows; ++i)
            flows_.push_back(Flow{QpCc(cfg.cc, cfg.link_rate), NpQpState{Qpn{static_cast<uint32_t>(i + 1)}},
                                  cfg.flow_start_gap * i});
        for (int i = 0; i < cfg.flows; ++i) reschedule(i, Nanos{0});
        push(Nanos{0}, Ev::Sample, 0, 0);
    }

    void push(Nanos t, Ev k, int flow, uint64_t arg) { evq_.push(Event{t, seq_++, k, flow, arg}); }
    bool empty() const { return evq_.empty(); }
    Event pop() {
        const Event e = evq_.top();
        evq_.pop();
        return e;
    }

    // Handles a host event. Returns true when a data packet left sender
    // e.flow at e.t: it reaches the fabric one serialisation plus one link
    // delay later.
    bool handle(const Event& e, Bytes queue_now) {
        const Nanos now = e.t;
        switch (e.kind) {
            case Ev::Send: {
                Flow& f = flows_[e.flow];
                if (e.arg != f.send_gen) return false;
                f.send_at = Nanos::max();
                f.cc.on_tx(cfg_.packet_bytes, now);
                reschedule(e.flow, now);
                return true;
            }
            case Ev::Timer: {
                Flow& f = flows_[e.flow];
                if (e.arg != f.timer_gen) return false;
                f.timer_at = Nanos::max();
                f.cc.on_timer(now);
                reschedule(e.flow, now);
                return false;
            }
            case Ev::Receive: {
                Flow& f = flows_[e.flow];
                f.interval_bytes += cfg_.packet_bytes.v;
                res_.flows[e.flow].delivered_bytes += cfg_.packet_bytes.v;
                if (e.arg != 0 && cfg_.cc.algorithm == CcAlgorithm::kDcqcn && np_.on_ce_packet(f.np, now)) {
                    ++res_.cnps_sent;
                    push(now + cfg_.cnp_delay, Ev::Cnp, e.flow, 0);
                }
                return false;
            }
            case Ev::Cnp:
                flows_[e.flow].cc.on_cnp(now);
                ++res_.flows[e.flow].cnps_received;
                reschedule(e.flow, now);
                return false;
            case Ev::Pause:
                pause(e.flow, now, e.arg == kPauseUntilResumed ? Nanos::max() : now + Nanos{static_cast<int64_t>(e.arg)});
                return false;
            case Ev::Sample: {
                Sample s{now, queue_now, {}, {}};
                for (Flow& f : flows_) {
                    s.rate_gbps.push_back(now >= f.start ? f.cc.rate().as_gbps() : 0.0);
                    s.throughput_gbps.push_back(static_cast<double>(f.interval_bytes) * 8 /
                                                static_cast<double>(cfg_.sample_interval.v));
                    f.interval_bytes = 0;
                }
                res_.samples.push_back(std::move(s));
                push(now + cfg_.sample_interval, Ev::Sample, 0, 0);
                return false;
            }
            default: return false;
        }
    }

    // A PFC frame reached sender i: it may not start a packet before `until`
    // (until <= now resumes it).
    void pause(int i, Nanos now, Nanos until) {
        Flow& f = flows_[i];
        res_.time_paused += std::max(Nanos{0}, std::min(f.paused_until, now) - std::min(f.pause_start, now));
        f.pause_start = now;
        f.paused_until = until;
        reschedule(i, now);
    }

    void finish(Nanos end) {
        for (int i = 0; i < cfg_.flows; ++i) {
            Flow& f = flows_[i];
            res_.time_paused += std::max(Nanos{0}, std::min(f.paused_until, end) - std::min(f.pause_start, end));
            res_.flows[i].rate_decreases = f.cc.counters().rate_decreases;
        }
    }

private:
    struct Flow {
        QpCc cc;
        NpQpState np;
        Nanos start;
        uint64_t send_gen = 0;
        uint64_t timer_gen = 0;
        Nanos send_at = Nanos::max();
        Nanos timer_at = Nanos::max();
        Nanos pause_start{0};
        Nanos paused_until{0};
        uint64_t interval_bytes = 0;
    };

    // Pending Send/Timer events are superseded, not removed: each carries the
    // generation it was scheduled under and is ignored once that changed.
    void reschedule(int i, Nanos now) {
        Flow& f = flows_[i];
        const Nanos s = f.paused_until == Nanos::max()
                            ? Nanos::max()
                            : std::max({f.cc.next_send_time(), f.start, now, f.paused_until});
        if (s != f.send_at) {
            f.send_at = s;
            ++f.send_gen;
            if (s != Nanos::max()) push(s, Ev::Send, i, f.send_gen);
        }
        const Nanos tm = f.cc.next_timer();
        if (tm != f.timer_at) {
            f.timer_at = tm;
            ++f.timer_gen;
            if (tm != Nanos::max()) push(std::max(tm, now), Ev::Timer, i, f.timer_gen);
        }
    }

    const BottleneckConfig& cfg_;
    BottleneckResult& res_;
    DcqcnNp np_;
    std::vector<Flow> flows_;
    std::priority_queue<Event, std::vector<Event>, Later> evq_;
    uint64_t seq_ = 0;
};

}  // namespace rocemu::cc::sim::detail
