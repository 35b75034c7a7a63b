#include "fabric/engine_nic.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include "dataplane/wire/l2.hpp"

namespace rocemu::fabric {

namespace {

constexpr Bytes kWireOverhead{20};

// Bit sets over QP and flow indices (64 a word).
void set_bit(std::vector<uint64_t>& words, std::size_t i, bool on = true) {
    const uint64_t bit = uint64_t{1} << (i & 63);
    words[i >> 6] = on ? words[i >> 6] | bit : words[i >> 6] & ~bit;
}
// f(i) for each set bit, in order; each word as it was when the walk reached
// it, so f may set or clear bits.
template <typename F>
void for_each_bit(const std::vector<uint64_t>& words, F&& f) {
    for (std::size_t w = 0; w < words.size(); ++w)
        for (uint64_t b = words[w]; b != 0; b &= b - 1) f(w * 64 + static_cast<std::size_t>(std::countr_zero(b)));
}
// Where NIC i's arena is mapped (i + 1 arenas above this; discard regions
// are numbered from it), so that RETH addresses (and the pcaps) repeat from
// run to run. 32 TiB is above AddressSanitizer's shadow (which ends just
// past 16 TiB) and below its allocator (96 TiB) and the shared libraries, so
// the hint is honoured in sanitizer builds too.
constexpr uint64_t kArenaHint = uint64_t{0x2000} << 32;
// Where the next region starts: regions are 64-byte aligned.
constexpr uint64_t line_aligned(uint64_t used) { return (used + 63) & ~uint64_t{63}; }

transport::PathMtu path_mtu(uint32_t bytes) {
    switch (bytes) {
        case 256: return transport::PathMtu::Mtu256;
        case 512: return transport::PathMtu::Mtu512;
        case 1024: return transport::PathMtu::Mtu1024;
        case 2048: return transport::PathMtu::Mtu2048;
        default: return transport::PathMtu::Mtu4096;
    }
}

}  // namespace

EngineNic::EngineNic(sim::Simulator& sim, const Topology& topo, uint32_t nic_index)
    : sim_(sim),
      line_rate_(topo.cfg.host_link.speed),
      prio_(topo.cfg.sw.base.tc_to_pg[topo.cfg.sw.base.dscp_to_tc[topo.cfg.nic.dscp & 63]]),
      stuck_(topo.nics[nic_index].mac, prio_, line_rate_),
      pause_(prio_, line_rate_),
      spec_(topo.nics[nic_index]),
      profile_(topo.cfg.nic),
      gateway_mac_(topo.switches[spec_.sw].port_mac[spec_.sw_port]),
      nic_index_(nic_index) {
    transport::EngineConfig cfg;
    cfg.mac = wire::MacAddr{spec_.mac};
    cfg.gids = {wire::IpAddr::from_v4(spec_.ip)};
    cfg.cnp_dscp = profile_.cc.dcqcn.cnp_dscp;
    cfg.cnp_pcp = profile_.cc.dcqcn.cnp_802p_prio;
    cfg.min_time_between_cnps = profile_.cc.dcqcn.min_time_between_cnps;
    cfg.rng_seed = nic_index + 1;
    // A NIC holds a QP for each flow it sends or receives: a 2048-NIC
    // all-to-all needs 4094 (ConnectX offers millions); the limit only bounds.
    cfg.max_qp = kMaxQps;
    transport::VerbsError err;
    eng_ = transport::Engine::create(cfg, err);
    if (!eng_) throw std::invalid_argument(err.msg);
    pd_ = eng_->alloc_pd().value;
    // Grown by create_qp with the sending QPs (the 65536 entries it had were
    // 2 MiB a NIC, 512 MiB of a 256-NIC fabric).
    cq_ = eng_->create_cq(kSqDepth).value;
}

EngineNic::~EngineNic() {
    if (arena_) munmap(arena_, kArenaBytes);
}

sim::NodeId EngineNic::attach() {
    return sim_.add_node(*this);
}

EngineNic::Region EngineNic::add_region(uint64_t bytes) {
    const uint64_t at = line_aligned(arena_used_);
    if (at + bytes > kArenaBytes) throw std::invalid_argument("EngineNic: memory arena exhausted");
    if (arena_ == nullptr) {
        // Address space only: pages are committed as regions touch them.
        void* hint = reinterpret_cast<void*>(kArenaHint + uint64_t{nic_index_ + 1} * kArenaBytes);
        void* a = mmap(hint, kArenaBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a == MAP_FAILED) throw std::invalid_argument("EngineNic: cannot map the memory arena");
        arena_ = static_cast<uint8_t*>(a);
    }
    arena_used_ = at + bytes;
    Region r;
    r.addr = arena_ + at;
    r.va = reinterpret_cast<uint64_t>(r.addr);
    r.len = bytes;
    const auto mr = eng_->reg_mr(pd_, r.addr, bytes, transport::kLocalWrite | transport::kRemoteWrite);
    if (!mr.ok()) throw std::invalid_argument(mr.error.msg);
    r.lkey = mr.value.lkey;
    r.rkey = mr.value.rkey;
    return r;
}

EngineNic::Region EngineNic::discard_region(uint64_t bytes) {
    // An MR per region, as add_region: the same keys in the same order.
    const auto mr = eng_->alloc_discard_mr(pd_);
    if (!mr.ok()) throw std::invalid_argument(mr.error.msg);
    const uint64_t at = line_aligned(discard_used_);
    discard_used_ = at + bytes;
    Region r;
    r.va = kArenaHint + at;
    r.len = bytes;
    r.lkey = mr.value.lkey;
    r.rkey = mr.value.rkey;
    return r;
}

EngineNic::Region EngineNic::null_region(uint64_t bytes) {
    if (null_mr_.lkey == 0) {
        const auto mr = eng_->alloc_null_mr(pd_);
        if (!mr.ok()) throw std::invalid_argument(mr.error.msg);
        null_mr_ = mr.value;
    }
    Region r;
    r.len = bytes;
    r.lkey = null_mr_.lkey;
    return r;
}

Qpn EngineNic::create_qp(QpEnd end) {
    transport::QpInitAttr ia;
    ia.pd = pd_;
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    // A flow keeps at most kChunksInFlight WRITEs posted, never inline: a
    // deeper queue or an inline area would only be memory (4096 WQEs of
    // 240 B and 1 MiB of inline room a QP made an all-to-all over 32 NICs,
    // 992 QPs, touch 2 GB before its first packet). The receiver posts
    // nothing, and the sender answers no request, so each side's queues of
    // the other kind take one entry: with the engine's defaults (256 of
    // each) a 256-NIC all-to-all held 10.7 GB, 80 KiB a QP.
    const bool sender = end == QpEnd::Sender;
    ia.cap.max_send_wr = sender ? kSqDepth : 1;
    ia.cap.max_inline_data = 0;
    // WRITEs without immediate consume no receive; those of a flow that reports arrivals do.
    ia.cap.max_recv_wr = end == QpEnd::StepReceiver ? kRecvDepth : 1;
    // The receiver's ACKs: one per AckReq, which a flow's WRITEs carry on
    // each 64 KiB chunk's last packet, and at most kChunksInFlight chunks (128
    // PSNs) are unacknowledged; 64 leaves room for retried chunks' duplicates
    // and NAKs. One it could not queue is counted (drop_resp_queue_full).
    ia.resp_queue = sender ? 1 : kRespQueue;
    // Every WQE posted completes once, so the CQ never holds more than the
    // sending QPs' send queues and the StepReceivers' receive queues:
    // grown to that bound, it never overflows. Doubled when outgrown, as a
    // resize copies the ring.
    cq_need_ += sender ? kSqDepth : end == QpEnd::StepReceiver ? kRecvDepth : 0;
    if (cq_need_ > cq_room_) {
        while (cq_need_ > cq_room_) cq_room_ *= 2;
        if (const auto e = eng_->resize_cq(cq_, cq_room_); e.err) throw std::invalid_argument(e.msg);
    }
    ia.peer_accepts_cnp = profile_.cc.algorithm != cc::CcAlgorithm::kNone;
    ia.reliability = profile_.spraying ? transport::Reliability::Spray : transport::Reliability::Interop;
    // Oblivious spraying: as many paths as the engine offers (its default
    // of 4 collides on a 4-spine fabric), taken in turn.
    ia.spray_paths = 16;
    ia.spray_policy = transport::SprayPolicy::RoundRobin;
    const auto r = eng_->create_qp(ia);
    if (!r.ok())
        throw std::invalid_argument(fmt::format("NIC {} ({}): a QP for one more flow: {} (a fabric NIC holds at most {})",
                                                nic_index_, spec_.name, r.error.msg, kMaxQps));
    const uint32_t at = r.value.v - transport::Engine::kFirstQpn;
    if (at >= ctx_at_.size()) ctx_at_.resize(at + 1, UINT32_MAX);
    ctx_at_[at] = static_cast<uint32_t>(qps_.size());
    qps_.push_back(QpCtx{r.value, cc::QpCc(profile_.cc, line_rate_)});
    cc_armed_.resize((qps_.size() + 63) / 64);
    cc_changed(qps_.back());
    return r.value;
}

void EngineNic::connect(Qpn local, Qpn remote, const NicSpec& peer, Psn sq_psn, Psn rq_psn, uint16_t udp_sport) {
    using namespace transport;
    QpAttr a;
    a.qp_state = QpState::Init;
    a.port_num = 1;
    a.qp_access_flags = kRemoteWrite;
    auto check = [](const VerbsError& e) {
        if (e.err) throw std::invalid_argument(e.msg);
    };
    check(eng_->modify_qp(local, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, fx_));
    a.qp_state = QpState::Rtr;
    a.path_mtu = path_mtu(profile_.rdma_mtu());
    a.dest_qp_num = remote;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    a.ah_attr.dgid = wire::IpAddr::from_v4(peer.ip);
    // Routed: the next hop is the leaf, whatever the destination.
    a.ah_attr.dmac = wire::MacAddr{gateway_mac_};
    a.ah_attr.udp_sport = udp_sport;
    a.ah_attr.traffic_class = static_cast<uint8_t>(profile_.dscp << 2 | wire::ecn::kEct0);
    check(eng_->modify_qp(
        local, a,
        kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer,
        fx_));
    a.qp_state = QpState::Rts;
    a.sq_psn = sq_psn;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    check(eng_->modify_qp(
        local, a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic, fx_));
    fx_.clear();
}

bool EngineNic::post_write(Qpn qp, uint64_t wr_id, const Region& src, uint32_t len, uint64_t remote_addr,
                           uint32_t rkey) {
    transport::SendWr w;
    w.wr_id = wr_id;
    w.opcode = transport::WrOpcode::RdmaWrite;
    w.send_flags = transport::kSendSignaled;
    w.sg_list.push_back(transport::Sge{reinterpret_cast<uint64_t>(src.addr), len, src.lkey});
    w.remote_addr = remote_addr;
    w.rkey = rkey;
    if (eng_->post_send(qp, std::span(&w, 1), fx_).err) return false;
    handle(sim_.now());
    return true;
}

void EngineNic::add_tx_flow(uint32_t flow, const FlowSpec& spec, Qpn qp, const Region& src, uint64_t remote_addr,
                            uint32_t rkey) {
    if (QpCtx* c = ctx(qp)) c->flow = flow;
    const auto i = static_cast<uint32_t>(tx_.size());
    TxFlow t{flow, qp, src, remote_addr, rkey, spec.start, spec.size.v, std::max(spec.steps, 1u)};
    t.imm = spec.reports_arrival();
    tx_.push_back(t);
    flow_at_.insert(std::upper_bound(flow_at_.begin(), flow_at_.end(), std::pair{flow, i}), std::pair{flow, i});
    due_.resize((tx_.size() + 63) / 64);
    unstarted_.push_back(i);
    next_start_ = std::min(next_start_, spec.start);
}

void EngineNic::add_rx_flow(uint32_t flow, const FlowSpec& spec, Qpn qp) {
    if (!spec.reports_arrival()) return;  // nobody waits for its arrival
    if (!post_recvs(qp, kRecvDepth))
        throw std::invalid_argument(fmt::format("flow {}: QP {} takes no RECVs (not a StepReceiver in RTS)", flow, qp.v));
    const auto i = static_cast<uint32_t>(rx_.size());
    rx_.push_back(RxFlow{flow, qp, StepArrivals(spec.size.v, spec.steps)});
    rx_at_.insert(std::upper_bound(rx_at_.begin(), rx_at_.end(), std::pair{qp.v, i}), std::pair{qp.v, i});
}

bool EngineNic::post_recvs(Qpn qp, uint32_t n) {
    // No SGE: a WRITE with immediate places its payload by its RETH and
    // takes only the WQE (and the immediate) from the receive queue.
    const transport::RecvWr r{};
    for (uint32_t i = 0; i < n; ++i)
        if (eng_->post_recv(qp, std::span(&r, 1), fx_).err) return false;
    return true;
}

void EngineNic::on_arrival(const transport::Wc& wc, Nanos now) {
    const auto it = std::lower_bound(rx_at_.begin(), rx_at_.end(), std::pair{wc.qp_num.v, uint32_t{0}});
    if (it == rx_at_.end() || it->first != wc.qp_num.v) return;
    RxFlow& r = rx_[it->second];
    if (!post_recvs(r.qp, 1)) ++c_.post_errors;
    for (uint32_t k = r.steps.add(wc.imm_data, wc.byte_len); k > 0; --k)
        if (sink_) sink_->on_step_arrived(r.flow, now);
}

EngineNic::TxFlow* EngineNic::tx_flow(uint32_t flow) {
    const auto it = std::lower_bound(flow_at_.begin(), flow_at_.end(), std::pair{flow, uint32_t{0}});
    return it != flow_at_.end() && it->first == flow ? &tx_[it->second] : nullptr;
}

void EngineNic::mark_due(const TxFlow& f) {
    set_bit(due_, static_cast<size_t>(&f - tx_.data()));
    post_due_ = true;
}

void EngineNic::prune_unstarted() {
    next_start_ = Nanos::max();
    std::erase_if(unstarted_, [&](uint32_t i) { return tx_[i].started; });
    for (const uint32_t i : unstarted_) next_start_ = std::min(next_start_, tx_[i].start);
}

void EngineNic::cc_changed(QpCtx& c) {
    const Nanos t = c.cc.next_timer();
    if (t == c.cc_at) return;
    set_bit(cc_armed_, static_cast<size_t>(&c - qps_.data()), t != Nanos::max());
    if (t < cc_next_)
        cc_next_ = t;
    else if (c.cc_at == cc_next_)
        cc_stale_ = true;  // the earliest may have moved later
    c.cc_at = t;
}

Nanos EngineNic::cc_next() {
    if (cc_stale_) {
        Nanos t = Nanos::max();
        for_each_bit(cc_armed_, [&](size_t i) { t = std::min(t, qps_[i].cc_at); });
        cc_next_ = t;
        cc_stale_ = false;
    }
    return cc_next_;
}

void EngineNic::begin_step(uint32_t flow, Nanos now) {
    TxFlow* f = tx_flow(flow);
    if (!f || f->opened >= f->steps) return;
    if (!f->started) {  // a gated flow's first step
        f->started = true;
        if (stats_) (*stats_)[f->flow].first_tx = now;
        prune_unstarted();
    }
    ++f->opened;
    mark_due(*f);
    sim_.arm_timer(*this, now);
}

void EngineNic::stall_from(Nanos at) {
    stall_at_ = at;
    stuck_.start(at);
}

void EngineNic::post_due(Nanos now) {
    post_due_ = false;
    // The flows whose start has come, and those marked (a completion, a
    // step opened), in tx_ order: no other flow has anything to post.
    if (next_start_ <= now)
        for (const uint32_t i : unstarted_)
            if (tx_[i].start <= now) set_bit(due_, i);
    bool started = false;
    for_each_bit(due_, [&](size_t i) {
        set_bit(due_, i, false);  // a failed post sets it again, for the next call
        post_flow(tx_[i], now, started);
    });
    if (started) prune_unstarted();
}

void EngineNic::post_flow(TxFlow& f, Nanos now, bool& started) {
    if (!f.started && f.start <= now) {
        f.started = true;
        f.opened = std::max(f.opened, 1u);
        started = true;
        if (stats_) (*stats_)[f.flow].first_tx = now;
    }
    while (f.step < f.opened && f.in_flight < kChunksInFlight) {
        const uint64_t step = step_bytes(f.size, f.steps, f.step);
        const auto len = static_cast<uint32_t>(std::min<uint64_t>(kChunk, step - f.posted));
        transport::SendWr w;
        w.wr_id = uint64_t{f.flow} << 32 | len;
        // The receiver counts each step's bytes by the immediate.
        w.opcode = f.imm ? transport::WrOpcode::RdmaWriteWithImm : transport::WrOpcode::RdmaWrite;
        w.imm_data = f.step;
        w.send_flags = transport::kSendSignaled;
        w.sg_list.push_back(transport::Sge{reinterpret_cast<uint64_t>(f.src.addr), len, f.src.lkey});
        w.remote_addr = f.remote_addr;
        w.rkey = f.rkey;
        if (eng_->post_send(f.qp, std::span(&w, 1), fx_).err) {
            ++c_.post_errors;
            // Tried again at the next post_due, as every flow is.
            set_bit(due_, static_cast<size_t>(&f - tx_.data()));
            break;
        }
        f.posted += len;
        ++f.in_flight;
        if (stats_) (*stats_)[f.flow].tx_bytes += len;
        if (f.posted == step) {
            ++f.step;
            f.posted = 0;
        }
    }
}

void EngineNic::on_completion(const transport::Wc& wc, Nanos now) {
    const bool ok = wc.status == transport::WcStatus::Success;
    ++(ok ? c_.completions : c_.failed_completions);
    if (wc.opcode == transport::WcOpcode::RecvRdmaWithImm) {
        if (ok) on_arrival(wc, now);
        return;
    }
    TxFlow* f = tx_flow(static_cast<uint32_t>(wc.wr_id >> 32));
    if (!f || !ok) return;
    const uint32_t len = static_cast<uint32_t>(wc.wr_id);
    --f->in_flight;
    f->acked += len;
    if (stats_) (*stats_)[f->flow].last_rx = now;
    mark_due(*f);
    // Completions come in posting order, and no chunk spans two steps.
    if (f->acked < step_bytes(f->size, f->steps, f->acked_step)) return;
    ++f->acked_step;
    f->acked = 0;
    if (sink_) sink_->on_step_done(f->flow, now);
}

EngineNic::QpCtx* EngineNic::ctx(Qpn q) {
    const uint32_t at = q.v - transport::Engine::kFirstQpn;
    if (q.v < transport::Engine::kFirstQpn || at >= ctx_at_.size() || ctx_at_[at] == UINT32_MAX) return nullptr;
    return &qps_[ctx_at_[at]];
}

BitsPerSec EngineNic::qp_rate(Qpn qp) const {
    const QpCtx* c = const_cast<EngineNic*>(this)->ctx(qp);
    return c ? c->cc.rate() : BitsPerSec{0};
}

void EngineNic::on_frame(sim::PortId, sim::FrameHandle h, Nanos now) {
    sim::FramePool& pool = sim_.pool();
    const std::span<const uint8_t> f = pool.frame(h);
    ++c_.rx_frames;
    const bool pfc_frame = wire::classify(f) == wire::FrameKind::Pfc;
    if (!pfc_frame && now >= stall_at_) {
        ++c_.stalled_drops;
        pool.free(h);
        return;
    }
    if (pfc_frame) {
        wire::Pfc pfc;
        if (wire::parse_pfc(f, pfc) && pause_.on_pfc(pfc, now)) ++c_.pfc_rx;
    } else {
        // The engine counts and drops what it cannot use, by reason.
        // The pool knows which bytes are zero: a zero payload is not read.
        eng_->on_frame(f, now, fx_, pool.zero_from(h));
    }
    pool.free(h);
    handle(now);
}

void EngineNic::on_timer(Nanos now) {
    // cc_next_ is never later than the earliest DCQCN timer. After a walk
    // rearm recomputes it, so a cc_next_ that found nothing due is not
    // armed again.
    if (cc_next_ <= now) {
        for_each_bit(cc_armed_, [&](size_t i) {
            QpCtx& q = qps_[i];
            if (q.cc.next_timer() > now) return;
            q.cc.on_timer(now);
            eng_->set_next_send(q.qpn, q.cc.next_send_time());
            cc_changed(q);
        });
        cc_stale_ = true;
    }
    if (eng_->next_timer() <= now) eng_->on_timer(now, fx_);
    post_due_ |= next_start_ <= now;
    handle(now);
}

void EngineNic::handle(Nanos now) {
    // A completion can open more WRITEs (this flow's next chunks, or a step
    // the sink opens at once), so loop until nothing is left to post.
    do {
        if (post_due_) post_due(now);
        try_send(now);
        for (const Qpn q : fx_.cnp_received) {
            ++c_.cnp_rx;
            if (QpCtx* c = ctx(q)) {
                c->cc.on_cnp(now);
                cc_changed(*c);
                eng_->set_next_send(q, c->cc.next_send_time());
                if (stats_ && c->flow != UINT32_MAX) ++(*stats_)[c->flow].cnp_rx;
            }
        }
        if (!fx_.cq_events.empty()) {
            transport::Wc wc[64];
            for (uint32_t n; (n = eng_->poll_cq(cq_, wc)) > 0;)
                for (uint32_t i = 0; i < n; ++i) on_completion(wc[i], now);
        }
        fx_.clear();
    } while (post_due_);
    rearm(now);
}

void EngineNic::try_send(Nanos now) {
    if (now < busy_until_) return;
    if (stuck_.next() <= now) {
        send_pause(now);
        return;
    }
    if (pause_.paused(now) || !eng_->tx_pending(now)) return;
    sim::FramePool& pool = sim_.pool();
    sim::FrameHandle h = pool.alloc();
    if (!h.valid()) {
        ++c_.pool_empty_drops;
        return;
    }
    // A payload from a null MR is left to the pool, which zeroes only what
    // an earlier frame left in the buffer.
    transport::TxFrame fr;
    fr.buf = pool.unmarked_buffer(h);
    fr.defer_zeros = true;
    if (eng_->tx_burst(std::span(&fr, 1), now, fx_) == 0) {
        pool.written(h, sim::FramePool::kFrameCapacity);
        pool.free(h);
        return;
    }
    if (fr.zeros_len) {
        pool.settle_zero_payload(h, fr.zeros_off, fr.len);
    } else {
        // Headers come from a template of kMaxLen bytes, zeros past the
        // frame's own (HeaderTemplate::write).
        pool.written(h, std::max<uint32_t>(fr.len, wire::HeaderTemplate::kMaxLen));
        pool.set_len(h, fr.len);
    }
    // Built in a whole buffer, sent as a compact frame if its payload is
    // zero: the whole buffer goes back to the pool, to build the next one in.
    h = pool.compact(h);
    const Bytes wire_bytes = Bytes{fr.len} + kWireOverhead;
    busy_until_ = now + line_rate_.serialise(wire_bytes);
    if (fr.data)
        if (QpCtx* c = ctx(fr.qpn)) {
            c->cc.on_tx(wire_bytes, now);
            cc_changed(*c);
            eng_->set_next_send(fr.qpn, c->cc.next_send_time());
            if (stats_ && c->flow != UINT32_MAX) ++(*stats_)[c->flow].tx_pkts;
        }
    ++c_.tx_frames;
    sim_.transmit_on(link_, h);
}

void EngineNic::send_pause(Nanos now) {
    Nanos wire_time{};
    const sim::FrameHandle h = stuck_.take(sim_.pool(), now, wire_time);
    if (!h.valid()) {
        ++c_.pool_empty_drops;
        return;
    }
    busy_until_ = now + wire_time;
    ++c_.pfc_tx;
    ++c_.tx_frames;
    sim_.transmit_on(link_, h);
}

void EngineNic::rearm(Nanos now) {
    Nanos t = std::min(eng_->next_timer(), cc_next());
    if (!unstarted_.empty()) t = std::min(t, std::max(now, next_start_));
    if (stuck_.next() != Nanos::max()) t = std::min(t, std::max({now, busy_until_, stuck_.next()}));
    if (eng_->tx_pending(now))
        t = std::min(t, std::max({now, busy_until_, pause_.until()}));
    else if (now < busy_until_)
        t = std::min(t, busy_until_);
    if (t == Nanos::max())
        sim_.cancel_timer(*this);
    else if (t != sim_.timer(*this))
        sim_.arm_timer(*this, t);
}

}  // namespace rocemu::fabric
