// A tiny two-engine virtual-time loop for the transport tests: frames pulled
// from one engine are delivered to the other after a delay, through a
// filter that may drop, duplicate, corrupt or delay chosen frames. Time only
// moves to the next delivery or timer, so runs are exact and reproducible.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "common/rng.hpp"
#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::transport::test {

using namespace rocemu::literals;

inline wire::MacAddr mac_of(int side) { return wire::MacAddr{{0x02, 0, 0, 0, 0, static_cast<uint8_t>(0x0a + side)}}; }
inline wire::IpAddr ip_of(int side) { return wire::IpAddr::from_v4(0x0A320000u + 11 + side); }

struct Delivery {
    bool drop = false;
    uint32_t copies = 1;
    Nanos extra{0};
    bool corrupt = false;
    bool ce = false;  // mark ECN-CE, as a congested switch would
};

// Decides the fate of each frame: side it came from, parsed packet, index of
// the frame in the whole run.
using Filter = std::function<Delivery(int from, const wire::RocePacket& p, uint64_t index)>;

// The engine of one side: its own MAC, GID and RNG stream.
inline std::unique_ptr<Engine> make_engine(const EngineConfig& base, int side) {
    EngineConfig c = base;
    c.mac = mac_of(side);
    c.gids = {ip_of(side)};
    c.rng_seed = base.rng_seed * 2 + side;
    VerbsError e;
    auto eng = Engine::create(c, e);
    EXPECT_FALSE(e) << e.msg;
    return eng;
}

class Loop {
public:
    explicit Loop(EngineConfig base = {}) {
        for (int s = 0; s < 2; ++s) eng[s] = make_engine(base, s);
        bufs.resize(32);
        for (auto& b : bufs) b.resize(Engine::kMinTxBuf);
    }

    std::unique_ptr<Engine> eng[2];
    Effects fx[2];
    Nanos now{0};
    Nanos delay = 2_us;
    Filter filter;
    std::vector<std::vector<uint8_t>> sent[2];  // every frame each side put on the wire
    bool keep_log = false;
    std::function<void(uint64_t steps)> trace;
    // Runtime hooks (congestion control): frames each side sent, effects of
    // each received frame, and an extra timer.
    std::function<void(int side, std::span<const TxFrame> frames)> tx_hook;
    std::function<void(int side)> rx_hook;
    std::function<Nanos()> hook_next_timer;
    std::function<void(Nanos)> hook_on_timer;
    uint64_t frames = 0;
    // When set, each frame is delivered as a chain (on_frame_chain) cut at
    // the offsets this returns, each segment in its own allocation.
    std::function<std::vector<size_t>(std::span<const uint8_t> frame)> cuts;

    Engine& operator[](int s) { return *eng[s]; }

    void pump() {
        for (int s = 0; s < 2; ++s) {
            for (;;) {
                TxFrame fr[32];
                for (size_t i = 0; i < 32; ++i) fr[i].buf = bufs[i];
                const uint32_t n = eng[s]->tx_burst(fr, now, fx[s]);
                if (tx_hook) tx_hook(s, std::span<const TxFrame>(fr, n));
                for (uint32_t i = 0; i < n; ++i) {
                    if (!fr[i].ext) {
                        emit(s, std::span<const uint8_t>(bufs[i].data(), fr[i].len));
                        continue;
                    }
                    // A zero-copy frame (EngineConfig::zero_copy_min) goes on the wire whole.
                    std::vector<uint8_t> whole(bufs[i].begin(), bufs[i].begin() + fr[i].len);
                    whole.insert(whole.end(), fr[i].ext, fr[i].ext + fr[i].ext_len);
                    whole.insert(whole.end(), fr[i].tail, fr[i].tail + fr[i].tail_len);
                    fr[i].pin->fetch_sub(1, std::memory_order_release);
                    emit(s, whole);
                }
                if (n < 32) break;
            }
        }
    }

    // Advances to the next event; false when nothing is left to happen.
    bool step(Nanos limit = Nanos::max()) {
        pump();
        Nanos t = Nanos::max();
        if (!q_.empty()) t = q_.top().at;
        for (int s = 0; s < 2; ++s) t = std::min(t, eng[s]->next_timer());
        if (hook_next_timer) t = std::min(t, hook_next_timer());
        if (t == Nanos::max() || t > limit) return false;
        if (t > now) now = t;
        while (!q_.empty() && q_.top().at <= now) {
            Item it = q_.top();
            q_.pop();
            if (cuts) deliver_chain(it.to, it.bytes);
            else eng[it.to]->on_frame(it.bytes, now, fx[it.to]);
            if (rx_hook) rx_hook(it.to);
        }
        if (hook_on_timer && hook_next_timer() <= now) hook_on_timer(now);
        for (int s = 0; s < 2; ++s)
            if (eng[s]->next_timer() <= now) eng[s]->on_timer(now, fx[s]);
        return true;
    }

    // Runs until `done` holds or nothing is left; returns whether `done` held.
    bool run(const std::function<bool()>& done, Nanos limit = Nanos::from_s(100)) {
        for (uint64_t n = 0;; ++n) {
            if (trace && n % 100000 == 0) trace(n);
            if (done()) return true;
            if (!step(limit)) return done();
        }
    }
    void settle(Nanos limit = Nanos::from_s(100)) {
        while (step(limit)) {
        }
    }

private:
    struct Item {
        Nanos at;
        uint64_t seq;
        int to;
        std::vector<uint8_t> bytes;
        bool operator<(const Item& o) const { return at != o.at ? at > o.at : seq > o.seq; }
    };

    void deliver_chain(int to, std::span<const uint8_t> f) {
        std::vector<size_t> at = cuts(f);
        at.push_back(f.size());
        std::vector<std::vector<uint8_t>> segs;
        size_t from = 0;
        for (const size_t c : at) {
            segs.emplace_back(f.begin() + static_cast<ptrdiff_t>(from), f.begin() + static_cast<ptrdiff_t>(c));
            from = c;
        }
        std::vector<std::span<const uint8_t>> views(segs.begin(), segs.end());
        eng[to]->on_frame_chain(views, now, fx[to]);
    }

    void emit(int from, std::span<const uint8_t> f) {
        if (keep_log) sent[from].emplace_back(f.begin(), f.end());
        Delivery d;
        if (filter) {
            wire::RocePacket p;
            wire::parse_roce(f, p, {.verify_icrc = false});
            d = filter(from, p, frames);
        }
        ++frames;
        if (d.drop) return;
        for (uint32_t c = 0; c < d.copies; ++c) {
            Item it{now + delay + d.extra, seq_++, 1 - from, std::vector<uint8_t>(f.begin(), f.end())};
            if (d.ce) wire::set_ip_ecn(it.bytes, wire::ecn::kCe);
            if (d.corrupt && it.bytes.size() > 60) it.bytes[54 + (seq_ % (it.bytes.size() - 60))] ^= 0x5A;
            q_.push(std::move(it));
        }
    }

    std::priority_queue<Item> q_;
    uint64_t seq_ = 0;
    std::vector<std::vector<uint8_t>> bufs;
};

// One side's verbs objects for a connected QP.
struct Side {
    PdHandle pd;
    CqHandle scq, rcq;
    Qpn qpn;
};

inline Side make_side(Engine& e, const QpInitAttr& tmpl = {}, uint32_t cqe = 4096) {
    Side s;
    s.pd = e.alloc_pd().value;
    s.scq = e.create_cq(cqe).value;
    s.rcq = e.create_cq(cqe).value;
    QpInitAttr ia = tmpl;
    ia.pd = s.pd;
    ia.send_cq = s.scq;
    ia.recv_cq = s.rcq;
    auto r = e.create_qp(ia);
    EXPECT_TRUE(r.ok()) << r.error.msg;
    s.qpn = r.value;
    return s;
}

struct ConnectOpts {
    PathMtu mtu = PathMtu::Mtu1024;
    Psn psn[2] = {Psn{100}, Psn{5000}};
    uint8_t timeout = 10;  // 4.2 ms
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 1;  // 10 us
    uint8_t max_rd_atomic = 16;
    uint32_t access = kRemoteWrite | kRemoteRead | kRemoteAtomic;
    uint8_t traffic_class = 0;  // DSCP << 2 | ECN of every packet of the QPs
};

// Moves both QPs RESET -> INIT -> RTR -> RTS, each pointing at the other.
// `Loops` is Loop or SimLoop (sim_harness.hpp).
template <typename Loops>
void connect(Loops& L, const Side s[2], const ConnectOpts& o = {}) {
    for (int i = 0; i < 2; ++i) {
        Engine& e = L[i];
        QpAttr init_qp, init_tmp;
        QpInitAttr ia;
        e.query_qp(s[i].qpn, init_tmp, ia);
        const bool rc = ia.qp_type == QpType::Rc, ud = ia.qp_type == QpType::Ud;
        QpAttr a;
        a.qp_state = QpState::Init;
        a.port_num = 1;
        a.pkey_index = 0;
        a.qp_access_flags = o.access;
        a.qkey = 0x1234;
        uint32_t m = kAttrState | kAttrPkeyIndex | kAttrPort | (ud ? kAttrQkey : kAttrAccessFlags);
        ASSERT_FALSE(e.modify_qp(s[i].qpn, a, m, L.fx[i])) << "INIT";
        a.qp_state = QpState::Rtr;
        a.path_mtu = o.mtu;
        a.dest_qp_num = s[1 - i].qpn;
        a.rq_psn = o.psn[1 - i];
        a.max_dest_rd_atomic = o.max_rd_atomic;
        a.min_rnr_timer = o.min_rnr_timer;
        a.ah_attr.dgid = ip_of(1 - i);
        a.ah_attr.dmac = mac_of(1 - i);
        a.ah_attr.traffic_class = o.traffic_class;
        m = ud ? kAttrState
               : kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                     (rc ? kAttrMaxDestRdAtomic | kAttrMinRnrTimer : 0);
        auto er = e.modify_qp(s[i].qpn, a, m, L.fx[i]);
        ASSERT_FALSE(er) << er.msg;
        a.qp_state = QpState::Rts;
        a.sq_psn = o.psn[i];
        a.timeout = o.timeout;
        a.retry_cnt = o.retry_cnt;
        a.rnr_retry = o.rnr_retry;
        a.max_rd_atomic = o.max_rd_atomic;
        m = kAttrState | kAttrSqPsn | (rc ? kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic : 0);
        er = e.modify_qp(s[i].qpn, a, m, L.fx[i]);
        ASSERT_FALSE(er) << er.msg;
    }
}

inline SendWr make_wr(uint64_t id, WrOpcode op, uint8_t* buf, uint32_t len, uint32_t lkey, bool signaled = true) {
    SendWr w;
    w.wr_id = id;
    w.opcode = op;
    w.send_flags = signaled ? uint32_t{kSendSignaled} : 0u;
    w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(buf), len, lkey});
    return w;
}

inline RecvWr make_recv(uint64_t id, uint8_t* buf, uint32_t len, uint32_t lkey) {
    RecvWr r;
    r.wr_id = id;
    r.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(buf), len, lkey});
    return r;
}

inline std::vector<Wc> drain(Engine& e, CqHandle cq) {
    std::vector<Wc> out;
    Wc wc[64];
    for (uint32_t n; (n = e.poll_cq(cq, wc)) > 0;) out.insert(out.end(), wc, wc + n);
    return out;
}

}  // namespace rocemu::transport::test
