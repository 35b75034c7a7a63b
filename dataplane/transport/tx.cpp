// The transmit pull and the timers. tx_burst fills caller-owned buffers:
// first every QP's ACKs, NAKs, atomic ACKs and CNPs, then data (requests and
// READ responses) one packet per QP per round, so QPs share the link
// round-robin. Data waits for the QP's pacing gate (set_next_send).
#include <bit>
#include <cstdio>
#include <cstdlib>

#include "dataplane/transport/engine.hpp"
#include "dataplane/transport/frame.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::transport {

// The engine's one transmit packet, reused so that building a frame does not
// start by clearing a 200-byte struct: the BTH and payload are reset, the
// addresses set from the AV (unless a built template `tpl` holds them), and
// the builder sets the extended headers its opcode carries (the encoder
// writes no others).
wire::RocePacket& Engine::tx_packet(const AddressVector& av, uint16_t sport, const wire::HeaderTemplate* tpl) {
    wire::RocePacket& p = tx_pkt_;
    p.bth = wire::Bth{};
    p.payload = nullptr;
    p.payload_len = 0;
    p.l3.ip_id = ip_id_++;
    p.udp_sport = sport;
    if (tpl != nullptr && tpl->valid()) return p;
    p.l2.dst = av.dmac;
    p.l2.src = cfg_.mac;
    p.l2.vlan = av.vlan;
    p.l2.vid = av.vlan_id;
    p.l2.pcp = av.pcp;
    p.l3.v6 = !av.dgid.is_v4();
    p.l3.src = cfg_.gids[av.sgid_index];
    p.l3.dst = av.dgid;
    p.l3.dscp = av.traffic_class >> 2;
    p.l3.ecn = av.traffic_class & 3;
    p.l3.ttl = av.hop_limit;
    p.l3.flow_label = av.flow_label;
    return p;
}

// Headers from the template when it is built; otherwise encoded in full,
// and the template built from this packet for the frames that follow.
bool Engine::encode_headers(wire::HeaderTemplate* tpl, const wire::RocePacket& p, std::span<uint8_t> out,
                            wire::EncodeLayout& lay) {
    if (tpl != nullptr && tpl->valid()) return tpl->write(p, out, lay);
    if (!wire::encode_roce_headers(p, out, lay)) return false;
    if (tpl != nullptr) tpl->build(p);
    return true;
}

bool Engine::build_cnp(Qp& qp, TxFrame& f) {
    using namespace wire;
    RocePacket& p = tx_packet(qp.attr.ah_attr, qp.sport);
    p.l3.dscp = cfg_.cnp_dscp;
    p.l3.ecn = ecn::kNotEct;
    p.l2.pcp = cfg_.cnp_pcp;
    p.bth.opcode = op::CNP;
    p.bth.becn = true;
    p.bth.dqpn = qp.cnp_dqpn;
    p.bth.psn = Psn{0};
    const size_t n = encode_roce(p, f.buf);
    if (n == 0) return false;
    f.len = static_cast<uint32_t>(n);
    f.qpn = qp.qpn;
    f.data = false;
    qp.cnp_pending = false;
    ++qp.counters.np_cnp_sent;
    ++counters_.np_cnp_sent;
    ++qp.counters.sent_pkts;
    ++counters_.sent_pkts;
    return true;
}

// Sends the responder's oldest queued output (one packet of it for READs).
// A READ response of zero_copy_min or more payload lends the MR's bytes
// (TxFrame::ext, pinned on the MR) as a request does (the MR named by the
// RespItem's rkey), and an MR deregistered since the READ was accepted (no pin
// held it) is not lent: its bytes are copied as before zero copy.
bool Engine::resp_build(Qp& qp, TxFrame& f) {
    using namespace wire;
    RespItem& it = qp.out_at(qp.out_head);
    const bool echo = qp.spraying() && it.sport != 0;
    HeaderTemplate* tpl = it.kind == RespItem::Kind::ReadResp ? &qp.data_tpl : &qp.ctl_tpl;
    RocePacket& p = tx_packet(qp.attr.ah_attr, echo ? it.sport : qp.sport, tpl);
    p.bth.dqpn = qp.attr.dest_qp_num;
    p.aeth = {it.syndrome, it.msn};
    bool done = true;
    EncodeLayout lay;
    uint64_t src = 0;
    const Mr* lent_mr = nullptr;
    switch (it.kind) {
        case RespItem::Kind::Ack:
        case RespItem::Kind::Nak:
            p.l3.ecn = ecn::kNotEct;
            p.bth.opcode = op::ACKNOWLEDGE;
            p.bth.psn = it.psn;
            p.bth.becn = it.ce_echo;
            break;
        case RespItem::Kind::AtomicAck:
            p.l3.ecn = ecn::kNotEct;
            p.bth.opcode = op::ATOMIC_ACKNOWLEDGE;
            p.bth.psn = it.psn;
            p.atomic_ack = it.orig;
            break;
        case RespItem::Kind::ReadResp: {
            const uint32_t k = it.next_pkt;
            const bool first = k == 0, last = k + 1 >= it.npkts;
            p.bth.opcode = it.npkts == 1 ? op::READ_RESPONSE_ONLY
                           : first       ? op::READ_RESPONSE_FIRST
                           : last        ? op::READ_RESPONSE_LAST
                                         : op::READ_RESPONSE_MIDDLE;
            p.bth.psn = it.psn + k;
            p.aeth = {aeth::kCreditInvalid, it.msn};
            const uint64_t off = uint64_t{k} * qp.mtu;
            p.payload_len = static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, it.length - off));
            src = it.va + off;
            if (cfg_.zero_copy_min && p.payload_len >= cfg_.zero_copy_min) {
                lent_mr = find_mr(it.rkey);
                // A key reused by another registration since does not cover the READ's bytes.
                if (lent_mr && !lent_mr->covers(src, p.payload_len)) lent_mr = nullptr;
            }
            // Spraying: each response packet takes a path chosen by its PSN,
            // so a resent response takes the same path as the first copy.
            if (qp.spraying()) p.udp_sport = qp.path_sport[p.bth.psn.value() % qp.init.spray_paths];
            done = last;
            break;
        }
    }
    if (!encode_headers(tpl, p, f.buf, lay)) return false;
    // An ACK's ICRC continues from its template's state over IP..BTH: only the AETH is left.
    FrameWriter fw(f.buf, lay);
    if (lent_mr) {
        lend(f, reinterpret_cast<const uint8_t*>(src), p.payload_len, lent_mr->key);
        f.tail_len = fw.finish_apart(f.ext, p.payload_len, f.tail);
        f.len = lay.payload_off;
    } else {
        if (p.payload_len)
            fw.put(reinterpret_cast<const uint8_t*>(src), p.payload_len,
                   reinterpret_cast<const uint8_t*>(it.va + it.length));
        fw.finish();
        f.len = static_cast<uint32_t>(lay.frame_len);
    }
    f.qpn = qp.qpn;
    f.data = it.kind == RespItem::Kind::ReadResp;
    ++qp.counters.sent_pkts;
    ++counters_.sent_pkts;
    if (done) ++qp.out_head;
    else ++it.next_pkt;
    return true;
}

uint32_t Engine::tx_burst(std::span<TxFrame> frames, Nanos now, Effects& fx) {
    // A caller's frame may still describe its last zero-copy payload.
    for (TxFrame& f : frames) {
        f.ext = nullptr;
        f.ext_len = 0;
        f.tail_len = 0;
    }
    uint32_t n = 0;
    const uint32_t nq = static_cast<uint32_t>(qps_.size());
    if (nq == 0) return 0;
    const uint32_t start = tx_rr_++ % nq;
    // Control first: it is small and unblocks the peer's requester.
    for (uint32_t k = 0; k < nq && n < frames.size(); ++k) {
        Qp* qp = qps_[(start + k) % nq].get();
        if (qp == nullptr) continue;
        while (n < frames.size()) {
            if (frames[n].buf.size() < kMinTxBuf) return n;
            if (qp->cnp_pending) {
                if (!build_cnp(*qp, frames[n])) break;
                ++n;
                continue;
            }
            if (qp->out_head == qp->out_tail || qp->out_at(qp->out_head).kind == RespItem::Kind::ReadResp) break;
            if (!resp_build(*qp, frames[n])) break;
            ++n;
        }
    }
    // Data: one packet per QP per round.
    bool progress = true;
    while (progress && n < frames.size()) {
        progress = false;
        for (uint32_t k = 0; k < nq && n < frames.size(); ++k) {
            Qp* qp = qps_[(start + k) % nq].get();
            if (qp == nullptr || now < qp->next_send) continue;
            qp->gate_armed = false;
            if (frames[n].buf.size() < kMinTxBuf) return n;
            bool sent = false;
            if (qp->out_head != qp->out_tail) {
                // Responses leave in PSN order; control behind a READ waits for it.
                sent = resp_build(*qp, frames[n]);
            } else if (req_ready(*qp, now)) {
                sent = req_build(*qp, frames[n], now, fx);
            }
            if (sent) {
                ++n;
                progress = true;
            }
        }
    }
    return n;
}

// Nothing to send, no timer, no pacing gate: tx_pending, next_timer and
// on_timer have nothing to do with it (req_ready is false without WQEs to
// start or packets to resend), and tx_burst passes it by.
bool Engine::idle(const Qp& q) {
    return !q.cnp_pending && q.out_head == q.out_tail && q.rexmit_head == q.rexmit_tail && q.sq_req == q.sq_head &&
           q.rto_deadline == Nanos::max() && q.rnr_deadline == Nanos::max() && q.sack_deadline == Nanos::max() &&
           q.read_hole_deadline == Nanos::max() && !q.gate_armed;
}

template <typename F>
void Engine::for_busy(F&& f) const {
    for (std::size_t w = 0; w < busy_.size(); ++w) {
        for (uint64_t bits = busy_[w]; bits != 0; bits &= bits - 1) {
            const std::size_t slot = w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
            Qp* q = qps_[slot].get();
            if (q == nullptr) {
                clear_busy(slot);
                continue;
            }
            if (!f(*q, slot)) return;
        }
    }
}

void Engine::check_busy() const {
#ifndef NDEBUG
    for (std::size_t i = 0; i < qps_.size(); ++i)
        if (qps_[i] && !(busy_[i >> 6] >> (i & 63) & 1) && !idle(*qps_[i])) {
            std::fprintf(stderr, "transport: QP slot %zu has work but is not marked busy\n", i);
            std::abort();
        }
#endif
}

bool Engine::tx_pending(Nanos now) const {
    check_busy();
    bool pending = false;
    for_busy([&](const Qp& q, std::size_t) {
        if (q.cnp_pending || q.out_head != q.out_tail) return !(pending = true);
        if (now < q.next_send) return true;
        if (q.rexmit_head != q.rexmit_tail && q.rnr_deadline == Nanos::max()) return !(pending = true);
        if (q.sq_req != q.sq_head && (q.state == QpState::Rts || q.state == QpState::Sqd) &&
            q.rnr_deadline == Nanos::max() && req_ready(q, now))
            return !(pending = true);
        return true;
    });
    return pending;
}

void Engine::on_timer(Nanos now, Effects& fx) {
    check_busy();
    for_busy([&](Qp& q, std::size_t) {
        if (now >= q.next_send) q.gate_armed = false;
        if (q.state == QpState::Err) return true;
        comp_timers(q, now, fx);
        if (q.spraying()) resp_timers(q, now);
        return true;
    });
}

Nanos Engine::next_timer() const {
    check_busy();
    Nanos t = Nanos::max();
    for_busy([&](const Qp& q, std::size_t slot) {
        // A QP without a timer may be idle: then it leaves the scans (only
        // here is a live QP's bit cleared, so a QP with timers costs no check).
        const bool timed = q.rto_deadline != Nanos::max() || q.rnr_deadline != Nanos::max() ||
                           q.sack_deadline != Nanos::max() || q.read_hole_deadline != Nanos::max() || q.gate_armed;
        if (!timed && idle(q)) clear_busy(slot);
        if (!timed || q.state == QpState::Err) return true;
        if (q.rto_deadline < t) t = q.rto_deadline;
        if (q.rnr_deadline < t) t = q.rnr_deadline;
        if (q.sack_deadline < t) t = q.sack_deadline;
        if (q.read_hole_deadline < t) t = q.read_hole_deadline;
        // The pacing gate is a timer only until on_timer or tx_burst has
        // seen it pass (from then on tx_pending() says whether data is
        // ready), and only for data that waits for nothing else: a
        // window-blocked or RNR-waiting requester is woken by the ACK or its
        // own timer. Reporting a passed gate would make a runtime that
        // sleeps until next_timer() spin.
        if (q.gate_armed && q.next_send < t && (q.out_head != q.out_tail || req_ready(q, q.next_send)))
            t = q.next_send;
        return true;
    });
    return t;
}

}  // namespace rocemu::transport
