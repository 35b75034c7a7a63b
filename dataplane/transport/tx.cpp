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
        // ACKs carry the QP's traffic class, ECN bits included, as every
        // packet of the QP does (rxe builds them from the QP's address
        // vector): a not-ECT ACK on a lossless class is what a SONiC switch's
        // WRED (ecn_all) drops once the queue passes its green minimum, and a
        // lost last ACK costs the requester a retransmit timeout.
        case RespItem::Kind::Ack:
        case RespItem::Kind::Nak:
            p.bth.opcode = op::ACKNOWLEDGE;
            p.bth.psn = it.psn;
            p.bth.becn = it.ce_echo;
            break;
        case RespItem::Kind::AtomicAck:
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
    // A caller's frame may still describe its last zero-copy payload; a
    // buffer too small for any frame ends the burst.
    for (size_t i = 0; i < frames.size(); ++i) {
        if (frames[i].buf.size() < kMinTxBuf) {
            frames = frames.first(i);
            break;
        }
        frames[i].ext = nullptr;
        frames[i].ext_len = 0;
        frames[i].tail_len = 0;
        frames[i].zeros_len = 0;
    }
    uint32_t n = 0;
    const uint32_t nq = static_cast<uint32_t>(qps_.size());
    if (nq == 0) return 0;
    // Round robin, control and data each on its own: from the QP after the
    // last that sent one of its kind. (A start that moved one slot per call
    // gave a NIC that sends a frame per call to the first busy QP after every
    // idle slot: with a fabric NIC's receiving QPs after its sending ones,
    // its first flow took most of its line rate and the all-to-all became a
    // rolling incast; a shared pointer moved by ACKs did the same.)
    sync();
    // Round-robin from `rr` over the slots due for `k`, as a pass over
    // every slot in that order would find them (the times are those at the
    // call: a QP changes only when visited, and visiting one more is harmless).
    const auto rotate = [&](QpSched::Key k, uint32_t& rr, auto&& f) {
        const uint32_t start = rr % nq;
        const auto g = [&](uint32_t slot) {
            if (n >= frames.size()) return false;
            touch(slot);
            const uint32_t before = n;
            f(*qps_[slot]);
            if (n != before) rr = slot + 1;
            return true;
        };
        sched_.for_due(k, now, start, nq, g) && sched_.for_due(k, now, 0, start, g);
    };
    // Control first: it is small and unblocks the peer's requester.
    rotate(QpSched::Control, ctl_rr_, [&](Qp& qp) {
        while (n < frames.size()) {
            if (qp.cnp_pending) {
                if (!build_cnp(qp, frames[n])) break;
                ++n;
                continue;
            }
            if (qp.out_head == qp.out_tail || qp.out_at(qp.out_head).kind == RespItem::Kind::ReadResp) break;
            if (!resp_build(qp, frames[n])) break;
            ++n;
        }
    });
    // Data: one packet per QP per round.
    bool progress = true;
    while (progress && n < frames.size()) {
        progress = false;
        rotate(QpSched::Send, data_rr_, [&](Qp& qp) {
            if (now < qp.next_send) return;
            qp.gate_armed = false;
            bool sent = false;
            if (qp.out_head != qp.out_tail) {
                // Responses leave in PSN order; control behind a READ waits for it.
                sent = resp_build(qp, frames[n]);
            } else if (req_ready(qp, now)) {
                sent = req_build(qp, frames[n], now, fx);
            }
            if (sent) {
                ++n;
                progress = true;
            }
        });
    }
    return n;
}

// A QP's times are a function of its state alone; `now` enters only as
// "now >= t". req_ready() depends on `now` only through the pacing gate
// (now < next_send), so req_ready(q, q.next_send) is what it says at any
// now >= next_send.
QpSched::Times Engine::times(const Qp& q) const {
    QpSched::Times t = QpSched::kNever;
    const bool out = q.out_head != q.out_tail;
    const bool rnr = q.rnr_deadline != Nanos::max();
    const bool ready = req_ready(q, q.next_send);
    const Nanos deadline = std::min({q.rto_deadline, q.rnr_deadline, q.sack_deadline, q.read_hole_deadline});
    // next_timer: the deadlines, and the pacing gate only until on_timer or
    // tx_burst has seen it pass (from then on tx_pending() says whether data
    // is ready), and only for data that waits for nothing else: a
    // window-blocked or RNR-waiting requester is woken by the ACK or its own
    // timer. Reporting a passed gate would make a runtime that sleeps until
    // next_timer() spin.
    if (q.state != QpState::Err) {
        t[QpSched::Timer] = deadline;
        if (q.gate_armed && (out || ready)) t[QpSched::Timer] = std::min(deadline, q.next_send);
    }
    // on_timer: a deadline to act on (comp_timers; resp_timers for a
    // spraying QP), or a gate to see pass.
    const Nanos acted = std::min({q.rto_deadline, q.rnr_deadline, q.read_hole_deadline,
                                  q.spraying() ? q.sack_deadline : Nanos::max()});
    t[QpSched::Wake] = q.gate_armed ? std::min(acted, q.next_send) : acted;
    if (q.cnp_pending || out) t[QpSched::Control] = QpSched::kAlways;
    if ((q.rexmit_head != q.rexmit_tail && !rnr) ||
        (q.sq_req != q.sq_head && (q.state == QpState::Rts || q.state == QpState::Sqd) && !rnr && ready))
        t[QpSched::Pending] = q.next_send;
    if (q.gate_armed || out || ready) t[QpSched::Send] = q.next_send;
    return t;
}

QpSched::Times Engine::slot_times(uint32_t slot) const { return qps_[slot] ? times(*qps_[slot]) : QpSched::kNever; }

void Engine::flush_sched() const {
    sched_.flush([&](uint32_t slot) { return slot_times(slot); });
}

void Engine::check_sched() const {
#if !defined(NDEBUG) || defined(ROCEMU_TRANSPORT_CHECKS)
    sched_.verify(static_cast<uint32_t>(qps_.size()), [&](uint32_t slot) { return slot_times(slot); }, "transport: QP");
#endif
}

bool Engine::tx_pending(Nanos now) const {
    sync();
    return sched_.min(QpSched::Control) <= now || sched_.min(QpSched::Pending) <= now;
}

void Engine::on_timer(Nanos now, Effects& fx) {
    sync();
    sched_.for_due(QpSched::Wake, now, 0, static_cast<uint32_t>(qps_.size()), [&](uint32_t slot) {
        Qp& q = *qps_[slot];
        touch(slot);
        if (now >= q.next_send) q.gate_armed = false;
        if (q.state == QpState::Err) return true;
        comp_timers(q, now, fx);
        if (q.spraying()) resp_timers(q, now);
        return true;
    });
}

Nanos Engine::next_timer() const {
    sync();
    return sched_.min(QpSched::Timer);
}

}  // namespace rocemu::transport
