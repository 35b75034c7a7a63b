// The responder: checks each request's PSN, opcode sequence, access, R_Key
// and bounds; places data; consumes RECVs (RNR NAK when none is posted);
// executes READs and atomics and keeps their results for duplicates; and
// queues ACKs/NAKs in PSN order, coalescing ACKs that have not left yet.
// In spraying mode a reorder window holds early packets (WRITE data is placed
// straight from its PSN offset) and holes are reported by selective NAKs.
#include <cstring>

#include "dataplane/transport/engine.hpp"
#include "dataplane/transport/frame.hpp"
#include "dataplane/transport/sgl.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::transport {

namespace {

enum class Kind : uint8_t { Send, Write, Read, Atomic, Other };

Kind kind_of(const wire::OpcodeInfo& i) {
    if (i.flags & wire::kOpSend) return Kind::Send;
    if (i.flags & wire::kOpWrite) return Kind::Write;
    if (i.flags & wire::kOpRead) return Kind::Read;
    if (i.flags & wire::kOpAtomic) return Kind::Atomic;
    return Kind::Other;
}

constexpr uint64_t kMaxMsg = 1ull << 31;

// Spraying: where an early packet of the WRITE in progress is placed
// directly. Every packet but the last carries one MTU, so the PSN alone
// gives its offset; false unless it fits the WRITE exactly.
bool direct_offset(const Qp& qp, const wire::RocePacket& p, uint64_t& off) {
    const uint8_t opc = p.bth.opcode;
    const bool write_cont = opc == wire::op::WRITE_MIDDLE || opc == wire::op::WRITE_LAST ||
                            opc == wire::op::WRITE_LAST_IMM;
    if (!qp.in_msg || !write_cont || kind_of(wire::opcode_info(qp.msg_op)) != Kind::Write) return false;
    const int32_t idx = Psn::diff(p.bth.psn, qp.msg_first_psn);
    if (idx <= 0) return false;
    off = uint64_t(idx) * qp.mtu;
    return p.info().flags & wire::kOpLast ? off + p.payload_len == qp.write_len
                                          : p.payload_len == qp.mtu && off + qp.mtu < qp.write_len;
}

}  // namespace

// The slot a queued response of `kind` goes to: an ACK replaces an ACK
// that has not left yet when coalescing; nullptr when the queue is full.
RespItem* Engine::resp_slot(Qp& qp, RespItem::Kind kind) {
    if (kind == RespItem::Kind::Ack && qp.out_size() > 0 && (cfg_.coalesce_acks || qp.spraying())) {
        RespItem& tail = qp.out_at(qp.out_tail - 1);
        if (tail.kind == RespItem::Kind::Ack) {
            ++qp.counters.ack_deferred;
            ++counters_.ack_deferred;
            return &tail;
        }
    }
    if (qp.out_size() == qp.out.size()) {
        // The request was handled; only its answer is lost (the requester's
        // retry asks again), and counted.
        drop(&qp, DropReason::RespQueueFull);
        return nullptr;
    }
    return &qp.out_at(qp.out_tail++);
}

bool Engine::resp_queue(Qp& qp, const RespItem& it) {
    RespItem* slot = resp_slot(qp, it.kind);
    if (slot == nullptr) return false;
    *slot = it;
    return true;
}

// Written in its slot: a RespItem built on the stack and copied stalls on
// store forwarding (the copy's wide loads over the fields' narrow stores).
void Engine::resp_ack(Qp& qp, Psn psn, const wire::RocePacket& p) {
    RespItem* it = resp_slot(qp, RespItem::Kind::Ack);
    if (it == nullptr) return;
    *it = RespItem{};
    it->kind = RespItem::Kind::Ack;
    it->syndrome = wire::aeth::kCreditInvalid;
    it->psn = psn;
    it->msn = qp.msn;
    if (qp.spraying()) {
        it->ce_echo = p.l3.ecn == wire::ecn::kCe;
        it->sport = p.udp_sport;
    }
}

// Queues a NAK. Anything but a sequence error or RNR is fatal for the
// responder: the QP goes to ERR once the NAK is queued.
void Engine::resp_nak(Qp& qp, uint8_t syndrome, Psn psn, Effects& fx) {
    const uint8_t type = syndrome & wire::aeth::kTypeMask;
    const bool fatal = !(type == wire::aeth::kRnrNak || syndrome == wire::aeth::kNakPsnSeqError);
    if (fatal) enter_error(qp, fx);
    RespItem it;
    it.kind = RespItem::Kind::Nak;
    it.syndrome = syndrome;
    it.psn = psn;
    it.msn = qp.msn;
    resp_queue(qp, it);
}

bool Engine::resp_take_recv(Qp& qp, RecvWqe& out) {
    RecvQueue& rq = qp.init.srq.id != 0 ? srqs_[qp.init.srq.id].rq : qp.rq;
    if (rq.empty()) return false;
    out = rq.front();
    rq.pop();
    return true;
}

bool Engine::resp_scatter(Qp& qp, const RecvWqe& w, uint64_t offset, const uint8_t* src, uint32_t len) {
    for (const Sge& s : w.sg_list) {
        if (len == 0) break;
        if (offset >= s.length) {
            offset -= s.length;
            continue;
        }
        const Mr* m = find_mr(s.lkey);
        if (m == nullptr || m->pd != qp.init.pd.id || !(m->access & kLocalWrite) || !m->covers(s.addr, s.length))
            return false;
        const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(s.length - offset, len));
        place(reinterpret_cast<uint8_t*>(s.addr) + offset, src, n);
        src += n;
        len -= n;
        offset = 0;
    }
    return len == 0;
}

namespace {

// Slides the responder's expected PSN (and the reorder window with it).
void advance_epsn(Qp& qp, uint32_t n) {
    if (!qp.spraying()) {
        qp.epsn += n;
        return;
    }
    for (uint32_t i = 0; i < n; ++i) {
        // A used slot's PSN is flagged: a slot never used is not even read,
        // and stays uncommitted.
        if (qp.ooo.test(qp.epsn)) qp.held(qp.epsn).used = false;
        qp.ooo.advance();
        ++qp.epsn;
    }
    if (Psn::diff(qp.highest_rcvd, qp.epsn) < 0) {
        qp.highest_rcvd = qp.epsn - 1;
        qp.sack_deadline = Nanos::max();  // nothing held: no hole left
    }
}

}  // namespace

// Executes one request whose PSN is the expected one. `placed`: the payload
// was already written, by spraying's direct placement or by on_frame while
// it checked the ICRC (resp_place_target).
void Engine::resp_execute(Qp& qp, const wire::RocePacket& p, bool placed, Nanos now, Effects& fx) {
    using namespace wire;
    (void)now;
    const OpcodeInfo& info = p.info();
    const uint32_t len = p.payload_len;
    const bool first = info.flags & kOpFirst, last = info.flags & kOpLast;
    const Kind k = kind_of(info);
    const Psn psn = p.bth.psn;

    auto fail = [&](uint8_t syndrome, WcStatus recv_status) {
        if (qp.type == QpType::Uc) {
            drop(&qp, DropReason::UcInvalid);
            qp.in_msg = false;
            qp.epsn = psn + 1;
            return;
        }
        if (qp.msg_has_wqe && recv_status != WcStatus::Success) {
            Wc wc;
            wc.wr_id = qp.msg_wqe.wr_id;
            wc.status = recv_status;
            wc.opcode = WcOpcode::Recv;
            wc.qp_num = qp.qpn;
            complete(qp, qp.init.recv_cq.id, wc, fx);
            qp.msg_has_wqe = false;
        }
        resp_nak(qp, syndrome, psn, fx);
    };
    auto rnr = [&]() {
        if (qp.type == QpType::Uc) {
            drop(&qp, DropReason::NoRecvWqe);
            qp.in_msg = false;
            qp.epsn = psn + 1;
            return;
        }
        ++qp.counters.send_rnr_err;
        ++counters_.send_rnr_err;
        qp.nak_sent = true;
        resp_nak(qp, static_cast<uint8_t>(aeth::kRnrNak | (qp.attr.min_rnr_timer & 0x1F)), psn, fx);
    };

    if (qp.in_msg) {
        if (first || k != kind_of(opcode_info(qp.msg_op))) return fail(aeth::kNakInvalidRequest, WcStatus::LocQpOpErr);
    } else if (!first) {
        return fail(aeth::kNakInvalidRequest, WcStatus::Success);
    }
    const uint32_t acc = qp.attr.qp_access_flags;
    if ((k == Kind::Write && !(acc & kRemoteWrite)) || (k == Kind::Read && !(acc & kRemoteRead)) ||
        (k == Kind::Atomic && !(acc & kRemoteAtomic)) || k == Kind::Other || (info.flags & kOpInv) ||
        p.bth.opcode == op::ATOMIC_WRITE)
        return fail(aeth::kNakInvalidRequest, WcStatus::Success);
    if (info.flags & kOpPayload) {
        if (len > qp.mtu || (!last && len != qp.mtu)) return fail(aeth::kNakInvalidRequest, WcStatus::LocLenErr);
    }

    switch (k) {
        case Kind::Send: {
            if (first) {
                if (!qp.msg_has_wqe) {
                    if (!resp_take_recv(qp, qp.msg_wqe)) return rnr();
                    qp.msg_has_wqe = true;
                }
                qp.msg_offset = 0;
            }
            if (qp.msg_offset + len > qp.msg_wqe.length)
                return fail(aeth::kNakInvalidRequest, WcStatus::LocLenErr);
            if (!placed && len && !for_payload(p, [&](const uint8_t* b, size_t n, size_t pos) {
                    return resp_scatter(qp, qp.msg_wqe, qp.msg_offset + pos, b, static_cast<uint32_t>(n));
                }))
                return fail(aeth::kNakRemoteOperational, WcStatus::LocProtErr);
            qp.msg_offset += len;
            qp.counters.rcvd_bytes += len;
            counters_.rcvd_bytes += len;
            ++qp.counters.rdma_recvs;
            ++counters_.rdma_recvs;
            if (last) {
                if (Wc* wc = complete_slot(qp.init.recv_cq.id, fx)) {
                    wc->wr_id = qp.msg_wqe.wr_id;
                    wc->opcode = WcOpcode::Recv;
                    wc->byte_len = static_cast<uint32_t>(qp.msg_offset);
                    wc->qp_num = qp.qpn;
                    wc->src_qp = qp.attr.dest_qp_num;
                    if (info.flags & kOpImm) {
                        wc->imm_data = p.imm;
                        wc->wc_flags |= kWcWithImm;
                    }
                }
                qp.msg_has_wqe = false;
                qp.in_msg = false;
                ++qp.msn;
            } else {
                qp.in_msg = true;
                if (first) {
                    qp.msg_op = p.bth.opcode;
                    qp.msg_first_psn = psn;
                }
            }
            break;
        }
        case Kind::Write: {
            if (first) {
                const Reth& r = p.reth;
                if (r.dma_len > kMaxMsg) return fail(aeth::kNakInvalidRequest, WcStatus::Success);
                qp.write_cached = false;
                qp.write_discard = false;
                if (r.dma_len) {
                    const Mr* m = find_mr(r.rkey);
                    if (m == nullptr || m->pd != qp.init.pd.id || !(m->access & kRemoteWrite) ||
                        !m->covers(r.va, r.dma_len))
                        return fail(aeth::kNakRemoteAccess, WcStatus::Success);
                    qp.write_cached = m->length <= cfg_.cached_write_max;
                    qp.write_discard = m->null;
                }
                if (last ? len != r.dma_len : r.dma_len <= len)
                    return fail(aeth::kNakInvalidRequest, WcStatus::Success);
                qp.write_va = r.va;
                qp.write_len = r.dma_len;
                qp.msg_offset = 0;
            }
            if (qp.msg_offset + len > qp.write_len || (last && qp.msg_offset + len != qp.write_len))
                return fail(aeth::kNakInvalidRequest, WcStatus::Success);
            if (last && (info.flags & kOpImm) && !qp.msg_has_wqe) {
                if (!resp_take_recv(qp, qp.msg_wqe)) return rnr();
                qp.msg_has_wqe = true;
            }
            if (!placed && len && !qp.write_discard) place_payload(p, qp.write_va + qp.msg_offset, qp.write_cached);
            qp.msg_offset += len;
            qp.counters.rcvd_bytes += len;
            counters_.rcvd_bytes += len;
            if (last) {
                if (info.flags & kOpImm) {
                    Wc wc;
                    wc.wr_id = qp.msg_wqe.wr_id;
                    wc.opcode = WcOpcode::RecvRdmaWithImm;
                    wc.byte_len = qp.write_len;
                    wc.imm_data = p.imm;
                    wc.wc_flags = kWcWithImm;
                    wc.qp_num = qp.qpn;
                    wc.src_qp = qp.attr.dest_qp_num;
                    complete(qp, qp.init.recv_cq.id, wc, fx);
                    qp.msg_has_wqe = false;
                }
                qp.in_msg = false;
                ++qp.msn;
            } else {
                qp.in_msg = true;
                if (first) {
                    qp.msg_op = p.bth.opcode;
                    qp.msg_first_psn = psn;
                }
            }
            break;
        }
        case Kind::Read: {
            const Reth& r = p.reth;
            if (r.dma_len > kMaxMsg) return fail(aeth::kNakInvalidRequest, WcStatus::Success);
            if (r.dma_len) {
                const Mr* m = find_mr(r.rkey);
                if (m == nullptr || m->pd != qp.init.pd.id || !(m->access & kRemoteRead) || !m->covers(r.va, r.dma_len))
                    return fail(aeth::kNakRemoteAccess, WcStatus::Success);
            }
            uint32_t pending = 0;
            for (uint32_t i = qp.out_head; i != qp.out_tail; ++i)
                pending += qp.out_at(i).kind == RespItem::Kind::ReadResp;
            if (pending >= qp.attr.max_dest_rd_atomic) return fail(aeth::kNakInvalidRequest, WcStatus::Success);
            const uint32_t npkts = r.dma_len == 0 ? 1 : (r.dma_len + qp.mtu - 1) / qp.mtu;
            ++qp.msn;
            RespItem it;
            it.kind = RespItem::Kind::ReadResp;
            it.psn = psn;
            it.msn = qp.msn;
            it.va = r.va;
            it.length = r.dma_len;
            it.npkts = npkts;
            it.rkey = r.rkey;
            resp_queue(qp, it);
            RespResource& res = qp.resources[qp.res_next++ % qp.resources.size()];
            res = {RespResource::Kind::Read, psn, psn + (npkts - 1), 0};
            advance_epsn(qp, npkts);
            return;
        }
        case Kind::Atomic: {
            const AtomicEth& a = p.atomic;
            const Mr* m = find_mr(a.rkey);
            if (m == nullptr || m->pd != qp.init.pd.id || !(m->access & kRemoteAtomic) || !m->covers(a.va, 8))
                return fail(aeth::kNakRemoteAccess, WcStatus::Success);
            if (a.va & 7) return fail(aeth::kNakInvalidRequest, WcStatus::Success);
            uint64_t orig;
            std::memcpy(&orig, reinterpret_cast<const void*>(a.va), 8);
            const uint64_t nv = p.bth.opcode == op::COMPARE_SWAP ? (orig == a.compare ? a.swap_add : orig)
                                                                 : orig + a.swap_add;
            std::memcpy(reinterpret_cast<void*>(a.va), &nv, 8);
            RespResource& res = qp.resources[qp.res_next++ % qp.resources.size()];
            res = {RespResource::Kind::Atomic, psn, psn, orig};
            ++qp.msn;
            RespItem it;
            it.kind = RespItem::Kind::AtomicAck;
            it.syndrome = aeth::kCreditInvalid;
            it.psn = psn;
            it.msn = qp.msn;
            it.orig = orig;
            resp_queue(qp, it);
            advance_epsn(qp, 1);
            return;
        }
        case Kind::Other:
            return;
    }
    advance_epsn(qp, 1);
    if (p.bth.ackreq && qp.type == QpType::Rc) resp_ack(qp, psn, p);
}

// A request with a PSN before the expected one: re-ACK sends and writes,
// replay READ responses, answer atomics from the saved result.
void Engine::resp_duplicate(Qp& qp, const wire::RocePacket& p) {
    ++qp.counters.duplicate_request;
    ++counters_.duplicate_request;
    const Kind k = kind_of(p.info());
    const Psn psn = p.bth.psn;
    if (k == Kind::Send || k == Kind::Write) {
        RespItem it;
        it.kind = RespItem::Kind::Ack;
        it.syndrome = wire::aeth::kCreditInvalid;
        it.psn = qp.epsn - 1;
        it.msn = qp.msn;
        resp_queue(qp, it);
        return;
    }
    for (const RespResource& r : qp.resources) {
        if (k == Kind::Atomic && r.kind == RespResource::Kind::Atomic && r.first_psn == psn) {
            RespItem it;
            it.kind = RespItem::Kind::AtomicAck;
            it.syndrome = wire::aeth::kCreditInvalid;
            it.psn = psn;
            it.msn = qp.msn;
            it.orig = r.orig;
            resp_queue(qp, it);
            return;
        }
        if (k == Kind::Read && r.kind == RespResource::Kind::Read && Psn::diff(psn, r.first_psn) >= 0 &&
            Psn::diff(psn, r.last_psn) <= 0) {
            const wire::Reth& rr = p.reth;
            const uint32_t npkts = rr.dma_len == 0 ? 1 : (rr.dma_len + qp.mtu - 1) / qp.mtu;
            if (rr.dma_len > kMaxMsg || psn + (npkts - 1) != r.last_psn) break;
            if (rr.dma_len) {
                const Mr* m = find_mr(rr.rkey);
                if (m == nullptr || m->pd != qp.init.pd.id || !(m->access & kRemoteRead) ||
                    !m->covers(rr.va, rr.dma_len))
                    break;
            }
            // The same READ may still be queued: replaying it would double the responses.
            for (uint32_t i = qp.out_head; i != qp.out_tail; ++i) {
                const RespItem& q = qp.out_at(i);
                if (q.kind == RespItem::Kind::ReadResp && Psn::diff(q.psn + (q.npkts - 1), r.last_psn) == 0) return;
            }
            RespItem it;
            it.kind = RespItem::Kind::ReadResp;
            it.psn = psn;
            it.msn = qp.msn;
            it.va = rr.va;
            it.length = rr.dma_len;
            it.npkts = npkts;
            it.rkey = rr.rkey;
            resp_queue(qp, it);
            return;
        }
    }
    drop(&qp, DropReason::ResourceMissing);
}

// Where the payload of a received frame, its ICRC not yet checked, may be
// placed while the ICRC is computed (one pass over the bytes instead of
// two): only a full-size continuation of a RC WRITE that passes every check
// the dispatch and the responder make. The WRITE in progress takes it at
// the expected PSN or, spraying, at a PSN of the window not yet held. Its
// destination then follows from the QP's state and its PSN, so a frame that
// fails its ICRC can only have written bytes of that WRITE that the packet
// with that PSN, which has not arrived yet, rewrites before the WRITE
// completes. Spraying, an early packet whose place is not known yet (its
// WRITE's FIRST has not arrived) is `staged`: copied into its own reorder
// slot, which counts as held only once the ICRC has passed.
// Anything else returns nullptr and is checked first, as rxe does.
Qp* Engine::resp_place_target(const wire::RocePacket& p, uint8_t*& dst, bool& staged) {
    using namespace wire;
    const uint8_t opc = p.bth.opcode;
    if ((opc != op::WRITE_MIDDLE && opc != op::WRITE_LAST) || p.payload_len < FrameWriter::kFusedFrom ||
        p.bth.pkey != kDefaultPkey)
        return nullptr;
    Qp* qp = local_gid(p.l3.dst) ? find_qp(p.bth.dqpn) : nullptr;
    if (qp == nullptr || qp->type != QpType::Rc || (qp->state != QpState::Rtr && qp->state != QpState::Rts) ||
        !(p.l3.src == qp->attr.ah_attr.dgid) || !(qp->attr.qp_access_flags & kRemoteWrite) ||
        (qp->spraying() && qp->ooo.test(p.bth.psn)))
        return nullptr;
    const bool writing = qp->in_msg && kind_of(opcode_info(qp->msg_op)) == Kind::Write;
    // Into a discard MR: checked on the general path, placed nowhere.
    if (writing && qp->write_discard) return nullptr;
    const int32_t d = Psn::diff(p.bth.psn, qp->epsn);
    uint64_t off = qp->msg_offset;
    staged = false;
    if (d == 0) {
        const uint64_t end = off + p.payload_len;
        if (!writing || p.payload_len > qp->mtu ||
            (opc == op::WRITE_LAST ? end != qp->write_len : p.payload_len != qp->mtu || end > qp->write_len))
            return nullptr;
    } else if (!qp->spraying() || d < 0 || static_cast<uint32_t>(d) >= qp->ooo.size()) {
        return nullptr;
    } else if (!writing || !direct_offset(*qp, p, off)) {
        if (p.payload_len > kHeldSlot) return nullptr;
        dst = qp->held_payload(p.bth.psn);
        staged = true;
        return qp;
    }
    dst = reinterpret_cast<uint8_t*>(qp->write_va + off);
    return qp;
}

void Engine::resp_rx(Qp& qp, const wire::RocePacket& p, bool placed, Nanos now, Effects& fx) {
    const Psn psn = p.bth.psn;
    const int32_t d = Psn::diff(psn, qp.epsn);
    if (qp.type == QpType::Uc) {
        const bool first = p.info().flags & wire::kOpFirst;
        if (d != 0 || (qp.in_msg && first)) {
            // A lost packet ends the message in progress; its RECV is kept for the next one.
            qp.in_msg = false;
            qp.epsn = psn;
        }
        if (!qp.in_msg && !first) {
            drop(&qp, DropReason::UcSequence);
            qp.epsn = psn + 1;
            return;
        }
        resp_execute(qp, p, false, now, fx);
        return;
    }
    if (qp.spraying()) {
        resp_spray_rx(qp, p, placed, now, fx);
        return;
    }
    if (d > 0) {
        ++qp.counters.out_of_seq_request;
        ++counters_.out_of_seq_request;
        if (!qp.nak_sent) {
            qp.nak_sent = true;
            resp_nak(qp, wire::aeth::kNakPsnSeqError, qp.epsn, fx);
        }
        return;
    }
    if (d < 0) {
        resp_duplicate(qp, p);
        return;
    }
    qp.nak_sent = false;
    resp_execute(qp, p, placed, now, fx);
}

// Spraying mode. PSNs in (epsn, epsn + window) are held (or, for the WRITE in
// progress, placed at once); the expected PSN executes and drains whatever
// follows it in order.
void Engine::resp_spray_rx(Qp& qp, const wire::RocePacket& p, bool placed, Nanos now, Effects& fx) {
    const Psn psn = p.bth.psn;
    const int32_t d = Psn::diff(psn, qp.epsn);
    if (d < 0) {
        resp_duplicate(qp, p);
        return;
    }
    if (static_cast<uint32_t>(d) >= qp.ooo.size()) {
        ++qp.counters.out_of_seq_request;
        ++counters_.out_of_seq_request;
        drop(&qp, DropReason::OutOfWindow);
        return;
    }
    if (Psn::diff(psn, qp.highest_rcvd) > 0) qp.highest_rcvd = psn;
    if (d == 0) {
        qp.nak_sent = false;
        if (qp.ooo.test(psn)) {
            // A copy is already held (a retransmission raced the original).
            drop(&qp, DropReason::DuplicateInWindow);
            return;
        }
        resp_execute(qp, p, placed, now, fx);
        resp_spray_drain(qp, now, fx);
        return;
    }
    if (qp.ooo.test(psn)) {
        ++qp.counters.duplicate_request;
        ++counters_.duplicate_request;
        drop(&qp, DropReason::DuplicateInWindow);
        return;
    }
    ++qp.counters.out_of_seq_request;
    ++counters_.out_of_seq_request;
    HeldPacket& h = qp.held(psn);
    h.pkt = p;
    h.placed = false;
    uint64_t off;
    if (direct_offset(qp, p, off)) {
        if (p.payload_len && !placed && !qp.write_discard) place_payload(p, qp.write_va + off, qp.write_cached);
        h.placed = true;
        ++qp.counters.direct_placed;
        ++counters_.direct_placed;
    }
    if (!h.placed) {
        if (p.payload_len > kHeldSlot) {
            drop(&qp, DropReason::Oversize);
            return;
        }
        uint8_t* dst = qp.held_payload(psn);
        // A staged payload (resp_place_target) already lies in its slot.
        if (p.payload_len && p.payload != dst)
            for_payload(p, [&](const uint8_t* b, size_t n, size_t pos) {
                std::memcpy(dst + pos, b, n);
                return true;
            });
        h.pkt.payload = dst;
    }
    h.used = true;
    qp.ooo.set(psn);

    if (qp.sack_deadline == Nanos::max()) {
        qp.sack_deadline = now + cfg_.sack_delay;
        qp.sack_mark = qp.highest_rcvd;
    }
}

// The reorder timer: every hole at or below the mark that is still open
// after sack_delay gets a selective NAK; holes seen later wait their turn.
void Engine::resp_timers(Qp& qp, Nanos now) {
    if (now < qp.sack_deadline) return;
    qp.sack_deadline = Nanos::max();
    if (Psn::diff(qp.highest_rcvd, qp.epsn) < 0) return;
    const int32_t span = std::min(Psn::diff(qp.sack_mark, qp.epsn), Psn::diff(qp.highest_rcvd, qp.epsn));
    for (int32_t i = 0; i <= span; ++i) {
        const Psn hole = qp.epsn + static_cast<uint32_t>(i);
        if (qp.ooo.test(hole)) continue;
        RespItem it;
        it.kind = RespItem::Kind::Nak;
        it.syndrome = wire::aeth::kNakPsnSeqError;
        it.psn = hole;
        it.msn = qp.msn;
        if (!resp_queue(qp, it)) break;
        ++qp.counters.sack_sent;
        ++counters_.sack_sent;
    }
    qp.sack_deadline = now + cfg_.sack_delay;
    qp.sack_mark = qp.highest_rcvd;
}

void Engine::resp_spray_drain(Qp& qp, Nanos now, Effects& fx) {
    while (qp.state != QpState::Err && qp.ooo.test(qp.epsn)) {
        HeldPacket& h = qp.held(qp.epsn);
        if (!h.used) break;
        // Executed in place: nothing writes a held packet while it runs.
        const wire::RocePacket& pkt = h.pkt;
        const bool placed = h.placed;
        h.used = false;
        qp.ooo.clear(qp.epsn);
        const Psn before = qp.epsn;
        resp_execute(qp, pkt, placed, now, fx);
        if (qp.epsn == before) break;  // RNR: the requester resends from here
    }
}

void Engine::resp_ud(Qp& qp, const wire::RocePacket& p, Effects& fx) {
    if (p.deth.qkey != qp.attr.qkey) {
        drop(&qp, DropReason::BadQkey);
        return;
    }
    RecvWqe w;
    if (!resp_take_recv(qp, w)) {
        drop(&qp, DropReason::NoRecvWqe);
        return;
    }
    Wc wc;
    wc.wr_id = w.wr_id;
    wc.opcode = WcOpcode::Recv;
    wc.qp_num = qp.qpn;
    wc.src_qp = p.deth.src_qp;
    wc.wc_flags = kWcGrh;
    constexpr uint32_t kGrh = 40;
    if (uint64_t{p.payload_len} + kGrh > w.length) {
        wc.status = WcStatus::LocLenErr;
        complete(qp, qp.init.recv_cq.id, wc, fx);
        return;
    }
    // The first 40 bytes of a UD receive buffer get the GRH: the IPv6 header,
    // or for IPv4 the IPv4 header in its last 20 bytes, as rxe writes it.
    uint8_t grh[kGrh] = {};
    const uint8_t* l3 = rx_l3_;
    if (p.l3.v6) std::memcpy(grh, l3, 40);
    else std::memcpy(grh + 20, l3, 20);
    if (!resp_scatter(qp, w, 0, grh, kGrh) ||
        !for_payload(p, [&](const uint8_t* b, size_t n, size_t pos) {
            return !n || resp_scatter(qp, w, kGrh + pos, b, static_cast<uint32_t>(n));
        })) {
        wc.status = WcStatus::LocProtErr;
        complete(qp, qp.init.recv_cq.id, wc, fx);
        return;
    }
    wc.byte_len = p.payload_len + kGrh;
    if (p.info().flags & wire::kOpImm) {
        wc.imm_data = p.imm;
        wc.wc_flags |= kWcWithImm;
    }
    ++qp.counters.rdma_recvs;
    ++counters_.rdma_recvs;
    complete(qp, qp.init.recv_cq.id, wc, fx);
}

}  // namespace rocemu::transport
