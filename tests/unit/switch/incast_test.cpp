// A 2:1 incast at 100 Gb/s run end to end in virtual time: two senders, one
// receiver, the switch core and Link objects, with the senders honouring the
// switch's PFC frames. It shows the pieces work together: PFC keeps the
// lossless class loss-free while the egress stays busy, without PFC the
// same traffic is dropped, and PFC's head-of-line blocking slows a flow that
// shares a paused sender with congested traffic.
#include <gtest/gtest.h>

#include <functional>
#include <queue>

#include "harness.hpp"
#include "switch/link.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

constexpr Nanos kProp = 1_us;
constexpr uint32_t kFrame = 1000;
const BitsPerSec kSpeed = BitsPerSec::gbps(100);

struct IncastResult {
    uint64_t sent = 0;
    uint64_t delivered = 0;
    uint64_t delivered_bytes_by_stop = 0;
    std::array<uint64_t, 5> port_bytes_by_stop{};
    uint64_t drops = 0;
    std::array<uint64_t, static_cast<std::size_t>(DropReason::kCount)> drop_reasons{};
    uint64_t xoff = 0;
    uint64_t xon = 0;
    Nanos host_paused{};  // summed over senders: time held back by pauses
};

// Which port the n-th frame of a sender is addressed to.
using Destination = std::function<int(int sender, uint64_t n)>;

// Hosts on ports 0 .. senders-1 send back to back, honouring PFC.
IncastResult run_incast(const SwitchConfig& cfg, Nanos send_for, Nanos run_for, int senders = 2,
                        const Destination& dest = [](int, uint64_t) { return 2; }) {
    Rig r(cfg);
    std::vector<uint64_t> frames_sent(senders);
    enum Kind { HostTx, Arrive, PfcAtHost, TxReady, Timer };
    struct Ev {
        Nanos t;
        uint64_t seq;
        Kind kind;
        int idx;
        PacketDesc d;
        PfcFrameDesc f;
    };
    auto later = [](const Ev& a, const Ev& b) { return a.t != b.t ? a.t > b.t : a.seq > b.seq; };
    std::priority_queue<Ev, std::vector<Ev>, decltype(later)> q(later);
    uint64_t seq = 0;
    auto push = [&](Nanos t, Kind k, int idx, const PacketDesc& d = {}, const PfcFrameDesc& f = {}) {
        q.push(Ev{t, seq++, k, idx, d, f});
    };

    LinkConfig lc;
    lc.speed = kSpeed;
    lc.propagation_delay = kProp;
    std::vector<Link> uplinks(senders, Link(lc));
    std::vector<Nanos> host_paused_until(senders);
    // One live HostTx per sender: a resume reschedules it, older ones go stale.
    std::vector<Nanos> host_wake(senders);
    std::vector<Nanos> blocked_since(senders, Nanos::max());
    auto wake = [&](int h, Nanos t) {
        host_wake[h] = t;
        push(t, HostTx, h);
    };
    IncastResult res;
    Nanos timer_at = Nanos::max();

    auto apply = [&](Effects& fx, Nanos now) {
        for (const Effect& e : fx) {
            switch (e.kind) {
                case EffectKind::SendPfc:
                    // The pause travels back over the sender's link.
                    push(now + kSpeed.serialise(Bytes{64 + 20}) + kProp, PfcAtHost, e.port, {}, e.pfc);
                    res.xoff += e.pfc.quanta[3] != 0;
                    res.xon += e.pfc.quanta[3] == 0;
                    break;
                case EffectKind::TxReady: push(e.at, TxReady, e.port); break;
                case EffectKind::Drop:
                    ++res.drops;
                    ++res.drop_reasons[static_cast<std::size_t>(e.reason)];
                    break;
                default: break;
            }
        }
        fx.clear();
        const Nanos t = r.sw->next_timer();
        if (t < timer_at) {
            timer_at = t;
            push(t, Timer, 0);
        }
    };

    for (int h = 0; h < senders; ++h) wake(h, 0_ns);
    Effects fx;
    while (!q.empty() && q.top().t <= run_for) {
        const Ev ev = q.top();
        q.pop();
        const Nanos now = ev.t;
        switch (ev.kind) {
            case HostTx: {
                if (now != host_wake[ev.idx] || now >= send_for) break;
                if (now < host_paused_until[ev.idx]) {
                    blocked_since[ev.idx] = std::min(blocked_since[ev.idx], now);
                    wake(ev.idx, host_paused_until[ev.idx]);
                    break;
                }
                if (blocked_since[ev.idx] != Nanos::max()) {
                    res.host_paused += now - blocked_since[ev.idx];
                    blocked_since[ev.idx] = Nanos::max();
                }
                PacketDesc d =
                    r.pkt(static_cast<PortId>(ev.idx), host_ip(dest(ev.idx, frames_sent[ev.idx]++)), kDscpLossless3, kFrame);
                const LinkDelivery del = uplinks[ev.idx].transmit(d.frame_len, now, r.rng);
                ++res.sent;
                push(del.arrival, Arrive, ev.idx, d);
                wake(ev.idx, del.tx_end);
                break;
            }
            case Arrive: r.sw->on_packet(ev.d, now, r.rng, fx); break;
            case PfcAtHost: {
                const uint16_t quanta = ev.f.quanta[3];
                host_paused_until[ev.idx] = now + kSpeed.serialise(Bytes{uint64_t{quanta} * 64});
                // A shorter pause or a resume lets a waiting sender go sooner.
                const Nanos next = std::max(host_paused_until[ev.idx], uplinks[ev.idx].busy_until());
                if (next < host_wake[ev.idx]) wake(ev.idx, next);
                break;
            }
            case TxReady:
                if (auto tx = r.sw->dequeue(static_cast<PortId>(ev.idx), now, r.rng, fx)) {
                    ++res.delivered;
                    if (tx->end <= send_for) {
                        res.delivered_bytes_by_stop += tx->frame_len.v;
                        res.port_bytes_by_stop[ev.idx] += tx->frame_len.v;
                    }
                }
                break;
            case Timer:
                if (now == timer_at) timer_at = Nanos::max();
                r.sw->on_timer(now, fx);
                break;
        }
        apply(fx, now);
    }
    return res;
}

TEST(SwitchIncast, PfcKeepsTwoToOneIncastLosslessAndTheEgressBusy) {
    const Nanos send_for = 2_ms;
    const IncastResult res = run_incast(sonic_default_config(3, kSpeed), send_for, 10_ms);
    EXPECT_EQ(res.drops, 0u);
    for (std::size_t i = 0; i < res.drop_reasons.size(); ++i)
        EXPECT_EQ(res.drop_reasons[i], 0u) << drop_reason_name(static_cast<DropReason>(i));
    EXPECT_GT(res.sent, 20000u);
    EXPECT_EQ(res.delivered, res.sent);
    EXPECT_GT(res.xoff, 0u);
    EXPECT_GT(res.xon, 0u);
    // The egress runs at line rate (minus preamble/IFG) while both send.
    const double line = static_cast<double>(kSpeed.bytes_in(send_for).v) * kFrame / (kFrame + 20);
    EXPECT_GT(static_cast<double>(res.delivered_bytes_by_stop), 0.97 * line);
    // Two senders into one port: about half of each sender's time is paused.
    EXPECT_GT(res.host_paused, send_for / 2);
}

TEST(SwitchIncast, WithoutPfcTheSameIncastDrops) {
    SwitchConfig cfg = sonic_default_config(3, kSpeed);
    cfg.pfc_enable = 0;
    const IncastResult res = run_incast(cfg, 2_ms, 10_ms);
    EXPECT_EQ(res.xoff, 0u);
    EXPECT_GT(res.drops, 0u);
    EXPECT_EQ(res.delivered + res.drops, res.sent);
}

}  // namespace
}  // namespace rocemu::sw::test

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

// Sender 0 sends one frame in five to the idle port 4 and the rest to the
// congested port 3; senders 1 and 2 send only to port 3. Unhindered, sender
// 0 would give port 4 a fifth of its line rate.
int hol_destination(int sender, uint64_t n) { return sender == 0 && n % 5 == 0 ? 4 : 3; }

TEST(SwitchIncast, PfcHeadOfLineBlockingSlowsAFlowToAnIdlePort) {
    const Nanos send_for = 4_ms;
    const double fifth_line = static_cast<double>(kSpeed.bytes_in(send_for).v) * kFrame / (kFrame + 20) / 5;
    // A 1 MiB pool reaches steady state within the first few hundred us.
    SwitchConfig cfg = sonic_default_config(5, kSpeed);
    cfg.pool_size = Bytes{1 << 20};

    const IncastResult pfc = run_incast(cfg, send_for, 20_ms, 3, hol_destination);
    EXPECT_EQ(pfc.drops, 0u);
    // Pauses meant for the port-3 congestion stop sender 0 entirely, so its
    // port-4 flow, which meets no congestion, gets well under its fifth.
    EXPECT_LT(static_cast<double>(pfc.port_bytes_by_stop[4]), 0.8 * fifth_line);
    EXPECT_GT(pfc.host_paused, 0_ns);

    SwitchConfig lossy = cfg;
    lossy.pfc_enable = 0;
    const IncastResult drop = run_incast(lossy, send_for, 20_ms, 3, hol_destination);
    // Without PFC the victim flow gets its full fifth; port 3 drops instead.
    EXPECT_GT(static_cast<double>(drop.port_bytes_by_stop[4]), 0.97 * fifth_line);
    EXPECT_GT(drop.drops, 0u);
}

}  // namespace
}  // namespace rocemu::sw::test
