// The requester: turns send WQEs into packets. It assigns PSNs, segments
// messages into FIRST/MIDDLE/LAST/ONLY at the path MTU, sets AckReq on the
// last packet and at least every ack_req_every packets, keeps at most
// max_unacked_psns PSNs and max_rd_atomic READs/atomics outstanding, and
// rewinds for go-back-N. In spraying mode it also picks each packet's UDP
// source port and resends single PSNs on request.
#include "dataplane/transport/engine.hpp"
#include "dataplane/transport/frame.hpp"
#include "dataplane/transport/sgl.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::transport {

namespace {

bool is_rd_atomic(WrOpcode op) {
    return op == WrOpcode::RdmaRead || op == WrOpcode::AtomicCmpAndSwp || op == WrOpcode::AtomicFetchAndAdd;
}

uint32_t packets_for(uint64_t len, uint32_t mtu) {
    return len == 0 ? 1 : static_cast<uint32_t>((len + mtu - 1) / mtu);
}

Nanos rto_of(const Qp& qp) {
    if (qp.attr.timeout == 0) return Nanos::max();
    return Nanos{int64_t{4096} << qp.attr.timeout};
}

}  // namespace

bool Engine::req_check_local(Qp& qp, SendWqe& w) {
    // An MR stops covering an SGE only by dereg_mr (its slot is reused
    // only after one), so a passed check holds until the next dereg_mr.
    if (w.mr_epoch == mr_epoch_) return true;
    w.null_sges = 0;
    if (w.is_inline) return true;  // copied into the QP's own buffer at post time
    const bool writes_local = is_rd_atomic(w.wr.opcode);
    for (uint32_t i = 0; i < w.wr.sg_list.size(); ++i) {
        const Sge& s = w.wr.sg_list[i];
        if (s.length == 0) {
            w.null_sges |= static_cast<uint8_t>(1u << i);  // gives nothing either way
            continue;
        }
        const Mr* m = find_mr(s.lkey);
        if (m == nullptr || m->pd != qp.init.pd.id || !m->covers(s.addr, s.length) ||
            (writes_local && !(m->access & kLocalWrite))) {
            w.local_error = true;
            w.error = WcStatus::LocProtErr;
            return false;
        }
        if (m->null) w.null_sges |= static_cast<uint8_t>(1u << i);
    }
    w.mr_epoch = mr_epoch_;
    return true;
}

bool Engine::req_ready(const Qp& qp, Nanos now) const {
    if (qp.state != QpState::Rts && qp.state != QpState::Sqd) return false;
    if (qp.rnr_deadline != Nanos::max() || now < qp.next_send) return false;
    if (qp.rexmit_head != qp.rexmit_tail) return true;
    if (qp.sq_req == qp.sq_head) return false;
    const SendWqe& w = qp.wqe(qp.sq_req);
    if (w.local_error) return false;
    if (qp.type != QpType::Rc) return qp.state == QpState::Rts || qp.req_pkt != 0;
    uint32_t window = cfg_.max_unacked_psns;
    if (qp.spraying() && qp.init.reorder_window < window) window = qp.init.reorder_window;
    if (Psn::diff(qp.next_psn, qp.comp_psn) >= static_cast<int32_t>(window)) return false;
    if (qp.req_pkt == 0 && !w.psn_assigned) {
        if (qp.state != QpState::Rts) return false;  // SQD: finish the current WQE, start none
        if (is_rd_atomic(w.wr.opcode) && qp.rd_atomic_inflight >= qp.attr.max_rd_atomic) return false;
        if ((w.wr.send_flags & kSendFence) && qp.rd_atomic_inflight != 0) return false;
    }
    return true;
}

uint16_t Engine::req_pick_path(Qp& qp, Psn psn) {
    const uint32_t n = qp.init.spray_paths;
    uint32_t path = 0;
    switch (qp.init.spray_policy) {
        case SprayPolicy::RoundRobin:
            path = qp.path_rr++ % n;
            break;
        case SprayPolicy::Random:
            path = static_cast<uint32_t>(rng_.below(n));
            break;
        case SprayPolicy::PathAware: {
            // Least-loaded path by a score that grows with use and with bad
            // signals (ECN echo, selective NAK); ties go round-robin.
            const uint32_t start = qp.path_rr++ % n;
            path = start;
            for (uint32_t k = 1; k < n; ++k) {
                const uint32_t i = (start + k) % n;
                if (qp.path_penalty[i] < qp.path_penalty[path]) path = i;
            }
            qp.path_penalty[path] += 1;
            if (qp.path_penalty[path] > (1 << 20))
                for (uint32_t i = 0; i < n; ++i) qp.path_penalty[i] >>= 1;
            break;
        }
    }
    qp.psn_path[psn.value() & (qp.psn_path.size() - 1)] = static_cast<uint8_t>(path);
    return qp.path_sport[path];
}

// Builds packet `pkt` of WQE `w` into `f`. Every packet of a WQE can be built
// again from the WQE alone, which is what go-back-N and selective
// retransmission rely on.
bool Engine::req_build_packet(Qp& qp, SendWqe& w, uint32_t pkt, TxFrame& f, uint16_t sport) {
    using namespace wire;
    const uint8_t base = qp.type == QpType::Rc ? op::kRc : qp.type == QpType::Uc ? op::kUc : op::kUd;
    const bool first = pkt == 0, last = pkt + 1 >= w.npkts;
    const uint64_t off = uint64_t{pkt} * qp.mtu;
    const AddressVector& av = qp.type == QpType::Ud ? ahs_[w.wr.ah.id].av : qp.attr.ah_attr;
    HeaderTemplate* tpl = qp.type == QpType::Ud ? nullptr : &qp.data_tpl;
    RocePacket& p = tx_packet(av, sport, tpl);
    p.bth.dqpn = qp.type == QpType::Ud ? w.wr.remote_qpn : qp.attr.dest_qp_num;
    p.bth.psn = w.first_psn + pkt;
    uint32_t payload = 0;
    const bool imm = w.wr.opcode == WrOpcode::SendWithImm || w.wr.opcode == WrOpcode::RdmaWriteWithImm;
    switch (w.wr.opcode) {
        case WrOpcode::Send:
        case WrOpcode::SendWithImm:
            if (qp.type == QpType::Ud) {
                p.bth.opcode = base + (imm ? op::SEND_ONLY_IMM : op::SEND_ONLY);
                p.deth.qkey = (w.wr.remote_qkey & 0x80000000u) ? qp.attr.qkey : w.wr.remote_qkey;
                p.deth.src_qp = qp.qpn;
            } else if (first && last) {
                p.bth.opcode = base + (imm ? op::SEND_ONLY_IMM : op::SEND_ONLY);
            } else if (first) {
                p.bth.opcode = base + op::SEND_FIRST;
            } else if (last) {
                p.bth.opcode = base + (imm ? op::SEND_LAST_IMM : op::SEND_LAST);
            } else {
                p.bth.opcode = base + op::SEND_MIDDLE;
            }
            payload = static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, w.length - off));
            p.bth.se = last && (w.wr.send_flags & kSendSolicited);
            break;
        case WrOpcode::RdmaWrite:
        case WrOpcode::RdmaWriteWithImm:
            if (first && last) p.bth.opcode = base + (imm ? op::WRITE_ONLY_IMM : op::WRITE_ONLY);
            else if (first) p.bth.opcode = base + op::WRITE_FIRST;
            else if (last) p.bth.opcode = base + (imm ? op::WRITE_LAST_IMM : op::WRITE_LAST);
            else p.bth.opcode = base + op::WRITE_MIDDLE;
            p.reth = {w.wr.remote_addr, w.wr.rkey, static_cast<uint32_t>(w.length)};
            payload = static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, w.length - off));
            p.bth.se = last && imm && (w.wr.send_flags & kSendSolicited);
            break;
        case WrOpcode::RdmaRead:
            // A retried READ asks only for what has not arrived yet.
            p.bth.opcode = op::READ_REQUEST;
            p.reth = {w.wr.remote_addr + off, w.wr.rkey, static_cast<uint32_t>(w.length - std::min(off, w.length))};
            break;
        case WrOpcode::AtomicCmpAndSwp:
            p.bth.opcode = op::COMPARE_SWAP;
            p.atomic = {w.wr.remote_addr, w.wr.rkey, w.wr.swap, w.wr.compare_add};
            break;
        case WrOpcode::AtomicFetchAndAdd:
            p.bth.opcode = op::FETCH_ADD;
            p.atomic = {w.wr.remote_addr, w.wr.rkey, w.wr.compare_add, 0};
            break;
    }
    if (imm && last) p.imm = w.wr.imm_data;
    if (qp.type == QpType::Rc) {
        const bool msg_end = last || w.wr.opcode == WrOpcode::RdmaRead;
        if (msg_end || ++qp.noack_pkts >= cfg_.ack_req_every) {
            p.bth.ackreq = true;
            qp.noack_pkts = 0;
        }
    }
    p.payload_len = payload;
    EncodeLayout lay;
    if (!encode_headers(tpl, p, f.buf, lay)) return false;
    FrameWriter fw(f.buf, lay);
    uint64_t at = off;
    // A payload wholly from null MRs is zeros the caller may write itself.
    const bool all_null = !w.is_inline && w.null_sges == static_cast<uint8_t>((1u << w.wr.sg_list.size()) - 1);
    // Inline data lives in the QP's inline_buf (lkey 0), which destroy_qp frees
    // and the next WQE in the slot overwrites while the frame may be in flight;
    // a null MR has nothing to lend.
    const Sge* whole = cfg_.zero_copy_min && payload >= cfg_.zero_copy_min && !w.is_inline && w.null_sges == 0
                           ? sgl_within(w.wr.sg_list, at, payload)
                           : nullptr;
    if (payload && all_null && f.defer_zeros && fw.fused()) {
        fw.put_zeros(payload, false);
        fw.finish();
        f.zeros_off = static_cast<uint16_t>(lay.payload_off);
        f.zeros_len = static_cast<uint16_t>(payload);
        f.len = static_cast<uint32_t>(lay.frame_len);
    } else if (whole) {
        lend(f, reinterpret_cast<const uint8_t*>(whole->addr) + at, payload, whole->lkey);
        f.tail_len = fw.finish_apart(f.ext, payload, f.tail);
        f.len = lay.payload_off;
    } else {
        if (payload) sgl_gather(w.wr.sg_list, w.null_sges, off, fw, payload);
        fw.finish();
        f.len = static_cast<uint32_t>(lay.frame_len);
    }
    f.qpn = qp.qpn;
    f.data = true;
    ++qp.counters.sent_pkts;
    ++counters_.sent_pkts;
    if (w.wr.opcode == WrOpcode::Send || w.wr.opcode == WrOpcode::SendWithImm) {
        ++qp.counters.rdma_sends;
        ++counters_.rdma_sends;
    }
    return true;
}

// Sends one packet: a selective retransmission first, else the next packet
// of the send queue.
bool Engine::req_build(Qp& qp, TxFrame& f, Nanos now, Effects& fx) {
    while (qp.rexmit_head != qp.rexmit_tail) {
        const Psn psn = qp.rexmit[qp.rexmit_head++ & (qp.rexmit.size() - 1)];
        if (qp.rexmit_pending.contains(psn)) qp.rexmit_pending.clear(psn);
        if (Psn::diff(psn, qp.comp_psn) < 0 || Psn::diff(psn, qp.next_psn) >= 0) continue;
        for (uint32_t i = qp.sq_comp; i != qp.sq_head; ++i) {
            SendWqe& w = qp.wqe(i);
            if (!w.psn_assigned) break;
            if (Psn::diff(psn, w.first_psn) < 0 || Psn::diff(psn, w.last_psn) > 0) continue;
            if (w.wr.opcode == WrOpcode::RdmaRead) break;  // READs recover by go-back-N
            // MR gone: the packet stays unsent, and the WQE fails when the
            // requester reaches it again (go-back-N after the timeout).
            if (!req_check_local(qp, w)) break;
            const uint32_t pkt = static_cast<uint32_t>(Psn::diff(psn, w.first_psn));
            if (!req_build_packet(qp, w, pkt, f, req_pick_path(qp, psn))) return false;
            ++qp.counters.selective_retransmits;
            ++counters_.selective_retransmits;
            if (qp.rto_deadline == Nanos::max()) qp.rto_deadline = now + rto_of(qp);
            return true;
        }
    }
    if (qp.sq_req == qp.sq_head) return false;
    SendWqe& w = qp.wqe(qp.sq_req);
    // Every packet re-checks the WQE's MRs, as rxe does: dereg_mr may have
    // run since the last one (nothing pins an MR between packets), and a
    // packet built now would read, or lend, memory the caller has freed.
    if (!req_check_local(qp, w)) {
        comp_progress(qp, now, fx);
        if (qp.state == QpState::Err) flush(qp, fx);
        return false;
    }
    if (qp.req_pkt == 0 && !w.psn_assigned) {
        w.first_psn = qp.next_psn;
        w.npkts = (w.wr.opcode == WrOpcode::AtomicCmpAndSwp || w.wr.opcode == WrOpcode::AtomicFetchAndAdd)
                      ? 1
                      : packets_for(w.length, qp.mtu);
        w.last_psn = w.first_psn + (w.npkts - 1);
        w.psn_assigned = true;
        if (is_rd_atomic(w.wr.opcode)) ++qp.rd_atomic_inflight;
    }
    const uint32_t pkt = qp.req_pkt;
    const Psn psn = w.first_psn + pkt;
    const uint16_t sport = qp.spraying() ? req_pick_path(qp, psn) : qp.sport;
    if (!req_build_packet(qp, w, pkt, f, sport)) return false;
    if (w.wr.opcode == WrOpcode::RdmaRead) {
        qp.req_pkt = w.npkts;
        qp.next_psn = w.last_psn + 1;
    } else {
        ++qp.req_pkt;
        qp.next_psn = psn + 1;
    }
    if (qp.req_pkt >= w.npkts) {
        ++qp.sq_req;
        qp.req_pkt = 0;
    }
    if (qp.type == QpType::Rc) {
        if (qp.rto_deadline == Nanos::max()) qp.rto_deadline = now + rto_of(qp);
    } else if (qp.req_pkt == 0) {
        // UC and UD have no acknowledgements: a WQE is done once it is on the wire.
        qp.comp_psn = qp.next_psn;
        comp_complete_wqe(qp, w, WcStatus::Success, fx);
        ++qp.sq_comp;
    }
    return true;
}

// Go-back-N: the next packet sent is `psn`, and everything after it follows
// again in order.
void Engine::req_rewind(Qp& qp, Psn psn) {
    qp.rexmit_head = qp.rexmit_tail;
    if (qp.spraying()) qp.rexmit_pending.reset(qp.comp_psn);
    for (uint32_t i = qp.sq_comp; i != qp.sq_head; ++i) {
        SendWqe& w = qp.wqe(i);
        if (!w.psn_assigned) break;
        if (Psn::diff(psn, w.first_psn) >= 0 && Psn::diff(psn, w.last_psn) <= 0) {
            qp.sq_req = i;
            qp.req_pkt = static_cast<uint32_t>(Psn::diff(psn, w.first_psn));
            qp.next_psn = psn;
            qp.noack_pkts = 0;
            return;
        }
    }
}

}  // namespace rocemu::transport
