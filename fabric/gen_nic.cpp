#include "fabric/gen_nic.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/crc_zero.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::fabric {

namespace {

constexpr Bytes kWireOverhead{20};  // preamble, SFD and IFG, as the switch counts them
constexpr uint16_t kPauseQuanta = 0xFFFF;
constexpr std::size_t kMaxCnpBacklog = 4096;
constexpr uint32_t kAckReqEvery = 64;

uint8_t pg_of_dscp(const sw::SwitchConfig& c, uint8_t dscp) { return c.tc_to_pg[c.dscp_to_tc[dscp & 63]]; }

}  // namespace

sim::FrameHandle StuckPause::take(sim::FramePool& pool, Nanos now, Nanos& wire_time) {
    // The refresh keeps the port paused well before the last pause runs out.
    next_ = now + speed_.serialise(Bytes{uint64_t{kPauseQuanta} * 64}) / 2;
    const sim::FrameHandle h = pool.alloc();
    if (!h.valid()) return h;
    wire::Pfc pfc;
    pfc.src = wire::MacAddr{mac_};
    pfc.class_enable = static_cast<uint8_t>(1u << prio_);
    pfc.quanta[prio_] = kPauseQuanta;
    const auto len = static_cast<uint32_t>(wire::encode_pfc(pfc, pool.buffer(h, wire::kPfcFrameLen)));
    pool.set_len(h, len);
    wire_time = speed_.serialise(Bytes{len} + kWireOverhead);
    return h;
}

GenNic::GenNic(sim::Simulator& sim, const Topology& topo, uint32_t nic_index, std::vector<FlowStats>& stats,
               uint32_t& flows_done)
    : sim_(sim),
      rdma_mtu_(topo.cfg.nic.rdma_mtu()),
      line_rate_(topo.cfg.host_link.speed),
      prio_(pg_of_dscp(topo.cfg.sw.base, topo.cfg.nic.dscp)),
      spraying_(topo.cfg.nic.spraying),
      stats_(stats),
      flows_done_(flows_done),
      stuck_(topo.nics[nic_index].mac, prio_, line_rate_),
      pause_(prio_, line_rate_),
      spec_(topo.nics[nic_index]),
      profile_(topo.cfg.nic),
      np_(profile_.cc.dcqcn),
      gateway_mac_(topo.switches[spec_.sw].port_mac[spec_.sw_port]) {}

sim::NodeId GenNic::attach() {
    return sim_.add_node(*this);
}

void GenNic::add_tx_flow(uint32_t flow, const FlowSpec& f, const NicSpec& dst) {
    wire::RocePacket p;
    p.l2.src = wire::MacAddr{spec_.mac};
    p.l2.dst = wire::MacAddr{gateway_mac_};
    p.l2.ethertype = wire::ethertype::kIpv4;
    p.l3.src = wire::IpAddr::from_v4(spec_.ip);
    p.l3.dst = wire::IpAddr::from_v4(dst.ip);
    p.l3.dscp = profile_.dscp;
    p.l3.ecn = wire::ecn::kEct0;
    p.udp_sport = f.sport;
    p.bth.dqpn = Qpn{kFlowQpnBase + flow};
    p.reth.rkey = 0x1000 + flow;
    p.reth.dma_len = static_cast<uint32_t>(std::min<uint64_t>(f.size.v, UINT32_MAX));
    const auto slot = static_cast<uint32_t>(tx_.size());
    tx_.push_back(TxFlow{flow, Psn{0}, 0, f, cc::QpCc(profile_.cc, line_rate_), p});
    tx_by_flow_.insert(std::lower_bound(tx_by_flow_.begin(), tx_by_flow_.end(), std::pair{flow, 0u}),
                       std::pair{flow, slot});
    sched_.resize(slot + 1);
    sched_.mark(slot);
}

GenNic::TxFlow* GenNic::find_tx(uint32_t flow) {
    const auto it = std::lower_bound(tx_by_flow_.begin(), tx_by_flow_.end(), std::pair{flow, 0u});
    return it != tx_by_flow_.end() && it->first == flow ? &tx_[it->second] : nullptr;
}

const GenNic::TxFlow* GenNic::find_tx(uint32_t flow) const { return const_cast<GenNic*>(this)->find_tx(flow); }

GenNic::Sched::Times GenNic::times(const TxFlow& t) const {
    Sched::Times r = Sched::kNever;
    r[kTimerKey] = t.cc.next_timer();
    if (t.sent < t.spec.size.v) r[kSendKey] = std::max(t.spec.start, t.cc.next_send_time());
    return r;
}

void GenNic::flush_sched() {
    const auto of_slot = [&](uint32_t slot) { return times(tx_[slot]); };
    sched_.flush(of_slot);
#ifndef NDEBUG
    sched_.verify(static_cast<uint32_t>(tx_.size()), of_slot, "fabric: generator flow");
#endif
}

void GenNic::add_rx_flow(uint32_t flow, const FlowSpec& f) {
    if (rx_index_.size() <= flow) rx_index_.resize(flow + 1, UINT32_MAX);
    rx_index_[flow] = static_cast<uint32_t>(rx_.size());
    RxFlow r{flow, f.size.v, Psn{0}, {}, cc::NpQpState{}, {}};
    r.np.remote_qpn = Qpn{kFlowQpnBase + flow};
    rx_.push_back(r);
}

void GenNic::stall_from(Nanos at) { stall_at_ = at; }

void GenNic::start() { rearm(sim_.now()); }

BitsPerSec GenNic::flow_rate(uint32_t flow) const {
    const TxFlow* t = find_tx(flow);
    return t != nullptr ? t->cc.rate() : BitsPerSec{0};
}

void GenNic::on_timer(Nanos now) {
    flush_sched();
    sched_.for_due(kTimerKey, now, 0, static_cast<uint32_t>(tx_.size()), [&](uint32_t slot) {
        tx_[slot].cc.on_timer(now);
        sched_.mark(slot);
        return true;
    });
    if (stall_at_ <= now && stuck_.next() == Nanos::max()) stuck_.start(now);
    try_send(now);
    rearm(now);
}

void GenNic::on_frame(sim::PortId, sim::FrameHandle h, Nanos now) {
    sim::FramePool& pool = sim_.pool();
    const std::span<const uint8_t> f = pool.frame(h);
    ++c_.rx_frames;
    switch (wire::classify(f)) {
        case wire::FrameKind::Pfc: {
            wire::Pfc pfc;
            if (!wire::parse_pfc(f, pfc)) {
                ++c_.bad_frame_drops;
                break;
            }
            ++c_.pfc_rx;
            pause_.on_pfc(pfc, now);
            break;
        }
        case wire::FrameKind::Roce: {
            if (now >= stall_at_) {
                ++c_.stalled_drops;
                break;
            }
            wire::RocePacket p;
            if (wire::parse_roce(f, p, {.verify_icrc = false}) != wire::ParseError::Ok || !icrc_ok(p, h, f)) {
                ++c_.bad_frame_drops;
                break;
            }
            receive_roce(p, now);
            break;
        }
        default: ++c_.bad_frame_drops; break;
    }
    pool.free(h);
    try_send(now);
    rearm(now);
}

bool GenNic::icrc_ok(const wire::RocePacket& p, sim::FrameHandle h, std::span<const uint8_t> frame) const {
    const sim::FramePool& pool = sim_.pool();
    const uint8_t* f = frame.data();
    const auto payload_off = static_cast<uint32_t>(p.payload - f);
    const uint32_t icrc_off = p.frame_len - wire::kIcrcLen;
    // A payload the pool knows to be zero is not read: the headers' CRC is
    // extended over it. A frame anything wrote into (a corrupting link) is
    // not known to be zero and takes the full CRC.
    const uint32_t icrc = pool.zero_between(h, payload_off, icrc_off)
                              ? wire::icrc_zero_payload(f + p.l3_off, payload_off - p.l3_off, icrc_off - payload_off,
                                                        p.l3.v6)
                              : wire::compute_icrc(f + p.l3_off, icrc_off - p.l3_off, p.l3.v6);
    return icrc == p.icrc;
}

void GenNic::receive_roce(const wire::RocePacket& p, Nanos now) {
    const uint32_t flow = p.bth.dqpn.v - kFlowQpnBase;
    if (p.bth.opcode == wire::op::CNP) {
        TxFlow* t = find_tx(flow);
        if (t == nullptr) {
            ++c_.unknown_qp_drops;
            return;
        }
        t->cc.on_cnp(now);
        sched_.mark(static_cast<uint32_t>(t - tx_.data()));
        ++stats_[flow].cnp_rx;
        ++c_.cnp_rx;
        return;
    }
    if (flow >= rx_index_.size() || rx_index_[flow] == UINT32_MAX) {
        ++c_.unknown_qp_drops;
        return;
    }
    RxFlow& r = rx_[rx_index_[flow]];
    FlowStats& s = stats_[flow];
    s.rx_bytes += p.payload_len;
    ++s.rx_pkts;
    s.last_rx = now;
    if (p.bth.psn != r.expected) ++s.rx_out_of_order;
    if (p.bth.psn >= r.expected) r.expected = p.bth.psn + 1;
    if (!s.done && s.rx_bytes >= r.size) {
        s.done = true;
        ++flows_done_;
    }
    if (p.l3.ecn != wire::ecn::kCe) return;
    ++s.ce_rx;
    if (profile_.cc.algorithm == cc::CcAlgorithm::kNone) return;
    r.peer_ip = p.l3.src;
    if (!np_.on_ce_packet(r.np, now)) return;
    if (cnp_queue_.size() - cnp_head_ >= kMaxCnpBacklog) {
        ++c_.cnp_queue_drops;
        return;
    }
    cnp_queue_.push_back(flow);
}

void GenNic::try_send(Nanos now) {
    if (now < busy_until_) return;
    if (stuck_.next() <= now) {
        send_pause(now);
        return;
    }
    if (now >= stall_at_) return;
    if (cnp_head_ < cnp_queue_.size() && send_cnp(now)) return;
    if (pause_.paused(now)) return;
    send_data(now);
}

void GenNic::send_pause(Nanos now) {
    Nanos wire_time{};
    const sim::FrameHandle h = stuck_.take(sim_.pool(), now, wire_time);
    if (!h.valid()) {
        ++c_.pool_empty_drops;
        return;
    }
    busy_until_ = now + wire_time;
    ++c_.pfc_tx;
    ++c_.tx_frames;
    c_.tx_bytes += sim_.pool().len(h);
    sim_.transmit_on(link_, h);
}

bool GenNic::send_cnp(Nanos now) {
    const uint32_t flow = cnp_queue_[cnp_head_++];
    if (cnp_head_ == cnp_queue_.size()) {
        cnp_queue_.clear();
        cnp_head_ = 0;
    }
    const RxFlow& r = rx_[rx_index_[flow]];
    sim::FramePool& pool = sim_.pool();
    sim::FrameHandle h = pool.alloc();
    if (!h.valid()) {
        ++c_.pool_empty_drops;
        return false;
    }
    wire::RocePacket p;
    p.l2.src = wire::MacAddr{spec_.mac};
    p.l2.dst = wire::MacAddr{gateway_mac_};
    p.l2.ethertype = wire::ethertype::kIpv4;
    p.l3.src = wire::IpAddr::from_v4(spec_.ip);
    p.l3.dst = r.peer_ip;
    p.l3.dscp = profile_.cc.dcqcn.cnp_dscp;
    p.l3.ecn = wire::ecn::kNotEct;
    p.l3.ip_id = ip_id_++;
    p.udp_sport = static_cast<uint16_t>(0xC000 | (flow & 0x3FFF));
    p.bth.opcode = wire::op::CNP;
    p.bth.becn = true;
    p.bth.dqpn = Qpn{kFlowQpnBase + flow};
    const auto frame_len = static_cast<uint32_t>(wire::roce_frame_len(p));
    const auto len = static_cast<uint32_t>(wire::encode_roce(p, pool.buffer(h, frame_len)));
    pool.set_len(h, len);
    h = pool.compact(h);
    busy_until_ = now + line_rate_.serialise(Bytes{len} + kWireOverhead);
    ++stats_[flow].cnp_tx;
    ++c_.cnp_tx;
    ++c_.tx_frames;
    c_.tx_bytes += len;
    sim_.transmit_on(link_, h);
    return true;
}

// The first flow from rr_ on (round robin) with bytes left whose start and
// pacing have passed sends one packet.
bool GenNic::send_data(Nanos now) {
    flush_sched();
    const auto n = static_cast<uint32_t>(tx_.size());
    bool sent = false;
    const auto send_from = [&](uint32_t i) {
        TxFlow& t = tx_[i];
        const uint64_t left = t.spec.size.v - t.sent;
        const auto len = static_cast<uint32_t>(std::min<uint64_t>(rdma_mtu_, left));
        const bool first = t.sent == 0;
        const bool last = len == left;
        wire::RocePacket& p = t.tmpl;
        p.bth.opcode = first && last ? wire::op::WRITE_ONLY
                       : first       ? wire::op::WRITE_FIRST
                       : last        ? wire::op::WRITE_LAST
                                     : wire::op::WRITE_MIDDLE;
        p.payload = nullptr;
        p.payload_len = len;
        // The payload is zeros: the pool keeps the headers and the ICRC
        // only (a compact frame), and the ICRC extends the headers' CRC over
        // the zeros.
        const auto frame_len = static_cast<uint32_t>(wire::roce_frame_len(p));
        const uint32_t zeros = len + wire::roce_pad(len);
        const uint32_t payload_off = frame_len - wire::kIcrcLen - zeros;
        const sim::FramePool::ZeroPayload fr = sim_.pool().alloc_zero_payload(payload_off, frame_len);
        if (!fr.h.valid()) {
            ++c_.pool_empty_drops;
            return false;
        }
        rr_ = (i + 1) % n;
        p.bth.psn = t.psn;
        p.bth.ackreq = last || (t.psn.value() % kAckReqEvery) == kAckReqEvery - 1;
        p.l3.ip_id = ip_id_++;
        if (spraying_) p.udp_sport = static_cast<uint16_t>(0xC000 | ((t.spec.sport + t.psn.value()) & 0x3FFF));
        wire::EncodeLayout lay;
        wire::encode_roce_head(p, fr.head, lay);
        wire::store_le32(fr.icrc,
                         wire::icrc_zero_payload(fr.head.data() + lay.l3_off, payload_off - lay.l3_off, zeros, lay.v6));

        const Bytes wire_bytes = Bytes{frame_len} + kWireOverhead;
        busy_until_ = now + line_rate_.serialise(wire_bytes);
        t.cc.on_tx(wire_bytes, now);
        t.sent += len;
        ++t.psn;
        sched_.mark(i);
        FlowStats& s = stats_[t.flow];
        if (first) s.first_tx = now;
        s.tx_bytes += len;
        ++s.tx_pkts;
        ++c_.tx_frames;
        c_.tx_bytes += frame_len;
        sim_.transmit_on(link_, fr.h);
        sent = true;
        return false;  // one packet
    };
    if (sched_.for_due(kSendKey, now, rr_, n, send_from)) sched_.for_due(kSendKey, now, 0, rr_, send_from);
    return sent;
}

void GenNic::rearm(Nanos now) {
    Nanos t = Nanos::max();
    const Nanos free_at = std::max(now, busy_until_);
    if (stall_at_ != Nanos::max()) t = std::max(free_at, stuck_.next() == Nanos::max() ? stall_at_ : stuck_.next());
    const bool stalled = now >= stall_at_;
    if (!stalled && cnp_head_ < cnp_queue_.size()) t = std::min(t, free_at);
    flush_sched();
    t = std::min(t, sched_.min(kTimerKey));
    if (!stalled && sched_.min(kSendKey) != Nanos::max())
        t = std::min(t, std::max({sched_.min(kSendKey), pause_.until(), free_at}));
    if (t == Nanos::max())
        sim_.cancel_timer(*this);
    else if (t != sim_.timer(*this))
        sim_.arm_timer(*this, t);
}

std::string gate_problem(std::span<const FlowSpec> flows, uint32_t id) {
    const FlowSpec& f = flows[id];
    for (const uint32_t w : {f.gate, f.behind})
        if (w != FlowSpec::kNoFlow && (w >= flows.size() || w == id))
            return fmt::format("flow {}: {} = {} names no other flow", id, w == f.gate ? "gate" : "behind", w);
    if (f.behind != FlowSpec::kNoFlow && !f.gated())
        return fmt::format("flow {}: behind = {} without a gate", id, f.behind);
    return {};
}

}  // namespace rocemu::fabric
