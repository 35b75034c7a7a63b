// The completer: turns ACKs, NAKs, READ responses and atomic ACKs into
// completions, in send-queue order. It owns the retransmit timer
// (4.096 us << timeout), retry_cnt and rnr_retry (7 = forever), and reports
// RETRY_EXC_ERR / RNR_RETRY_EXC_ERR when they run out.
#include <cstring>

#include "dataplane/transport/engine.hpp"
#include "dataplane/transport/sgl.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::transport {

namespace {

bool is_rd_atomic(WrOpcode op) {
    return op == WrOpcode::RdmaRead || op == WrOpcode::AtomicCmpAndSwp || op == WrOpcode::AtomicFetchAndAdd;
}

WcOpcode wc_opcode(WrOpcode op) {
    switch (op) {
        case WrOpcode::RdmaWrite:
        case WrOpcode::RdmaWriteWithImm: return WcOpcode::RdmaWrite;
        case WrOpcode::Send:
        case WrOpcode::SendWithImm: return WcOpcode::Send;
        case WrOpcode::RdmaRead: return WcOpcode::RdmaRead;
        case WrOpcode::AtomicCmpAndSwp: return WcOpcode::CompSwap;
        case WrOpcode::AtomicFetchAndAdd: return WcOpcode::FetchAdd;
    }
    return WcOpcode::Send;
}

Nanos rto_of(const Qp& qp) {
    if (qp.attr.timeout == 0) return Nanos::max();
    return Nanos{int64_t{4096} << qp.attr.timeout};
}

// IBTA table 45: RNR NAK timer codes in units of 10 us (code 0 is 655.36 ms).
constexpr uint32_t kRnrTimer10us[32] = {
    65536, 1,   2,   3,   4,   6,   8,   12,  16,   24,   32,   48,   64,   96,   128,  192,
    256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

}  // namespace

Nanos rnr_timer_delay(uint8_t code) { return Nanos{int64_t{kRnrTimer10us[code & 31]} * 10000}; }

void Engine::comp_complete_wqe(Qp& qp, SendWqe& w, WcStatus st, Effects& fx) {
    if (is_rd_atomic(w.wr.opcode) && w.psn_assigned && qp.rd_atomic_inflight > 0) --qp.rd_atomic_inflight;
    if (st == WcStatus::Success && !(w.wr.send_flags & kSendSignaled)) return;
    Wc* wc = complete_slot(qp.init.send_cq.id, fx);
    if (wc == nullptr) return;
    wc->wr_id = w.wr.wr_id;
    wc->status = st;
    wc->opcode = wc_opcode(w.wr.opcode);
    wc->byte_len = static_cast<uint32_t>(w.length);
    wc->qp_num = qp.qpn;
}

// Completes the oldest WQE with an error, then takes the QP to ERR, which
// flushes the rest.
void Engine::comp_error(Qp& qp, SendWqe& w, WcStatus st, Effects& fx) {
    comp_complete_wqe(qp, w, st, fx);
    ++qp.sq_comp;
    ++qp.counters.send_err;
    ++counters_.send_err;
    enter_error(qp, fx);
}

// After the completer moved forward: fresh retry budgets, the timer re-armed
// or stopped, and a WQE that failed its local checks reported once it is the
// oldest.
void Engine::comp_progress(Qp& qp, Nanos now, Effects& fx) {
    qp.gap_retry_armed = false;
    qp.retry_left = qp.attr.retry_cnt;
    qp.rnr_left = qp.attr.rnr_retry;
    // An ACK may cover PSNs the requester rewound to resend: skip them.
    if (static_cast<int32_t>(qp.sq_comp - qp.sq_req) > 0) {
        qp.sq_req = qp.sq_comp;
        qp.req_pkt = 0;
    }
    if (Psn::diff(qp.comp_psn, qp.next_psn) > 0) {
        qp.next_psn = qp.comp_psn;
        if (qp.sq_req != qp.sq_head && qp.wqe(qp.sq_req).psn_assigned) {
            SendWqe& w = qp.wqe(qp.sq_req);
            const int32_t d = Psn::diff(qp.comp_psn, w.first_psn);
            if (d > 0 && w.wr.opcode != WrOpcode::RdmaRead) qp.req_pkt = static_cast<uint32_t>(d);
            if (qp.req_pkt >= w.npkts) {
                ++qp.sq_req;
                qp.req_pkt = 0;
            }
        }
    }
    if (qp.spraying()) {
        while (Psn::diff(qp.comp_psn, qp.rexmit_pending.base()) > 0) qp.rexmit_pending.advance();
        while (Psn::diff(qp.comp_psn, qp.read_rcvd.base()) > 0) qp.read_rcvd.advance();
    }
    const bool outstanding = qp.sq_comp != qp.sq_head && qp.wqe(qp.sq_comp).psn_assigned;
    qp.rto_deadline = outstanding && qp.type == QpType::Rc ? now + rto_of(qp) : Nanos::max();
    comp_local_error(qp, fx);
}

// A WQE that failed its local checks (its MR deregistered while it was
// being sent) is reported once it is the oldest and the requester is back
// at it: after an ACK, or after a rewind. req_ready never sends from it
// again, so without this a rewind onto it would retry forever.
void Engine::comp_local_error(Qp& qp, Effects& fx) {
    if (qp.sq_comp == qp.sq_head || qp.sq_comp != qp.sq_req || !qp.wqe(qp.sq_comp).local_error) return;
    SendWqe& w = qp.wqe(qp.sq_comp);
    comp_error(qp, w, w.error, fx);
}

// Completes every WQE that an acknowledgement of `psn` covers. A READ or
// atomic covered without its response means the response was lost: retry.
// Returns false if the QP left the normal path (retry or error).
bool Engine::comp_ack_upto(Qp& qp, Psn psn, Nanos now, Effects& fx) {
    bool progress = false;
    while (qp.sq_comp != qp.sq_head) {
        SendWqe& w = qp.wqe(qp.sq_comp);
        if (!w.psn_assigned) break;
        if (Psn::diff(w.last_psn, psn) > 0) {
            if (w.wr.opcode != WrOpcode::RdmaRead && Psn::diff(psn, w.first_psn) >= 0 &&
                Psn::diff(psn + 1, qp.comp_psn) > 0) {
                qp.comp_psn = psn + 1;
                progress = true;
            }
            break;
        }
        if (is_rd_atomic(w.wr.opcode)) {
            if (progress) comp_progress(qp, now, fx);
            if (qp.spraying()) {
                // Its response may still be on a slower path: hold the ACK
                // until it completes, and retry only if it stays missing.
                if (!qp.ack_pending || Psn::diff(psn, qp.ack_pending_psn) > 0) qp.ack_pending_psn = psn;
                qp.ack_pending = true;
                if (qp.read_hole_deadline == Nanos::max()) qp.read_hole_deadline = now + cfg_.sack_delay;
                return false;
            }
            comp_retry(qp, w.first_psn + w.resp_pkts, now, fx);
            return false;
        }
        if (Psn::diff(w.last_psn + 1, qp.comp_psn) > 0) qp.comp_psn = w.last_psn + 1;
        comp_complete_wqe(qp, w, WcStatus::Success, fx);
        ++qp.sq_comp;
        progress = true;
    }
    if (progress) comp_progress(qp, now, fx);
    return true;
}

// Go-back-N from `from`. Signals that arrive before the retry has made
// progress and name the same PSN (reordered responses, re-ACKs of the
// duplicates the retry itself causes) do not retry again: without this,
// reordering would make retries multiply.
void Engine::comp_retry(Qp& qp, Psn from, Nanos now, Effects& fx) {
    if (qp.sq_comp == qp.sq_head) return;
    if (qp.gap_retry_armed && qp.gap_retry_psn == from) return;
    qp.gap_retry_armed = true;
    qp.gap_retry_psn = from;
    if (qp.retry_left == 0) {
        ++qp.counters.retry_exceeded_err;
        ++counters_.retry_exceeded_err;
        comp_error(qp, qp.wqe(qp.sq_comp), WcStatus::RetryExcErr, fx);
        return;
    }
    if (qp.retry_left != 7) --qp.retry_left;
    ++qp.counters.completer_retry_err;
    ++counters_.completer_retry_err;
    req_rewind(qp, from);
    qp.rto_deadline = now + rto_of(qp);
    comp_local_error(qp, fx);
}

void Engine::comp_timers(Qp& qp, Nanos now, Effects& fx) {
    if (now >= qp.rnr_deadline) {
        qp.rnr_deadline = Nanos::max();
        req_rewind(qp, qp.comp_psn);
        qp.rto_deadline = Nanos::max();
        comp_local_error(qp, fx);
    }
    if (now >= qp.read_hole_deadline) {
        // Spraying: a READ (or atomic) response has stayed missing for
        // sack_delay behind later ones: ask again from the first missing.
        qp.read_hole_deadline = Nanos::max();
        if (qp.sq_comp != qp.sq_head) {
            SendWqe& w = qp.wqe(qp.sq_comp);
            if (w.psn_assigned && is_rd_atomic(w.wr.opcode)) comp_retry(qp, w.first_psn + w.resp_pkts, now, fx);
        }
    }
    if (now >= qp.rto_deadline) {
        qp.rto_deadline = Nanos::max();
        qp.gap_retry_armed = false;
        if (qp.sq_comp != qp.sq_head && qp.wqe(qp.sq_comp).psn_assigned) comp_retry(qp, qp.comp_psn, now, fx);
    }
}

void Engine::comp_rx(Qp& qp, const wire::RocePacket& p, Nanos now, Effects& fx) {
    using namespace wire;
    const Psn psn = p.bth.psn;
    const uint8_t opc = p.bth.opcode;
    // Responses to PSNs never sent, or to nothing outstanding, are ghosts.
    if (qp.sq_comp == qp.sq_head || !qp.wqe(qp.sq_comp).psn_assigned || Psn::diff(psn, qp.next_psn) >= 0 ||
        Psn::diff(psn, qp.wqe(qp.sq_comp).first_psn) < -(1 << 22)) {
        drop(&qp, DropReason::GhostResponse);
        return;
    }
    if (opc == op::ACKNOWLEDGE) {
        const uint8_t syn = p.aeth.syndrome;
        const uint8_t type = syn & aeth::kTypeMask;
        if (type == aeth::kAck) {
            if (qp.spraying() && p.bth.becn)
                for (uint32_t i = 0; i < qp.init.spray_paths; ++i)
                    if (qp.path_sport[i] == p.udp_sport) qp.path_penalty[i] += 8;
            if (Psn::diff(psn, qp.comp_psn) < 0) {
                drop(&qp, DropReason::StaleResponse);
                return;
            }
            comp_ack_upto(qp, psn, now, fx);
            return;
        }
        if (type == aeth::kRnrNak) {
            ++qp.counters.rcvd_rnr_err;
            ++counters_.rcvd_rnr_err;
            if (Psn::diff(psn, qp.comp_psn) < 0) {
                drop(&qp, DropReason::StaleResponse);
                return;
            }
            if (!comp_ack_upto(qp, psn - 1, now, fx)) return;
            if (qp.sq_comp == qp.sq_head) return;
            if (qp.rnr_left == 0) {
                ++qp.counters.retry_rnr_exceeded_err;
                ++counters_.retry_rnr_exceeded_err;
                comp_error(qp, qp.wqe(qp.sq_comp), WcStatus::RnrRetryExcErr, fx);
                return;
            }
            if (qp.rnr_left != 7) --qp.rnr_left;
            qp.comp_psn = psn;
            qp.rnr_deadline = now + rnr_timer_delay(syn & 0x1F);
            qp.rto_deadline = Nanos::max();
            qp.rexmit_head = qp.rexmit_tail;
            return;
        }
        if (syn == aeth::kNakPsnSeqError) {
            ++qp.counters.rcvd_seq_err;
            ++counters_.rcvd_seq_err;
            if (Psn::diff(psn, qp.comp_psn) < 0) {
                drop(&qp, DropReason::StaleResponse);
                return;
            }
            if (qp.spraying()) {
                // Selective NAK: resend only `psn`; it acknowledges nothing.
                if (qp.rexmit_pending.contains(psn) && !qp.rexmit_pending.test(psn)) {
                    qp.rexmit_pending.set(psn);
                    qp.rexmit[qp.rexmit_tail++ & (qp.rexmit.size() - 1)] = psn;
                    qp.path_penalty[qp.psn_path[psn.value() & (qp.psn_path.size() - 1)]] += 8;
                } else {
                    drop(&qp, DropReason::StaleResponse);
                }
                return;
            }
            // A sequence NAK acknowledges everything before its PSN.
            if (!comp_ack_upto(qp, psn - 1, now, fx)) return;
            comp_retry(qp, psn, now, fx);
            return;
        }
        if (type == aeth::kNak) {
            if (Psn::diff(psn, qp.comp_psn) < 0) {
                drop(&qp, DropReason::StaleResponse);
                return;
            }
            if (!comp_ack_upto(qp, psn - 1, now, fx)) return;
            if (qp.sq_comp == qp.sq_head) return;
            WcStatus st = WcStatus::RemOpErr;
            if (syn == aeth::kNakInvalidRequest) st = WcStatus::RemInvReqErr;
            else if (syn == aeth::kNakRemoteAccess) st = WcStatus::RemAccessErr;
            else if (syn == aeth::kNakInvalidRdRequest) st = WcStatus::RemInvRdReqErr;
            comp_error(qp, qp.wqe(qp.sq_comp), st, fx);
            return;
        }
        drop(&qp, DropReason::BadResponse);
        return;
    }

    if (qp.spraying() && (p.info().flags & kOpRead)) {
        comp_read_spray(qp, p, now, fx);
        return;
    }
    // READ responses and atomic ACKs implicitly acknowledge earlier requests.
    if (Psn::diff(psn, qp.comp_psn) < 0) {
        drop(&qp, DropReason::StaleResponse);
        return;
    }
    if (!comp_ack_upto(qp, psn - 1, now, fx)) return;
    if (qp.sq_comp == qp.sq_head) {
        drop(&qp, DropReason::GhostResponse);
        return;
    }
    SendWqe& w = qp.wqe(qp.sq_comp);
    if (opc == op::ATOMIC_ACKNOWLEDGE) {
        const bool atomic = w.wr.opcode == WrOpcode::AtomicCmpAndSwp || w.wr.opcode == WrOpcode::AtomicFetchAndAdd;
        if (!atomic || psn != w.first_psn) {
            drop(&qp, DropReason::BadResponse);
            return;
        }
        const uint64_t orig = p.atomic_ack;
        std::memcpy(reinterpret_cast<void*>(w.wr.sg_list[0].addr), &orig, 8);
        qp.comp_psn = psn + 1;
        comp_complete_wqe(qp, w, WcStatus::Success, fx);
        ++qp.sq_comp;
        comp_progress(qp, now, fx);
        return;
    }

    // READ response.
    if (w.wr.opcode != WrOpcode::RdmaRead || Psn::diff(psn, w.first_psn) < 0 || Psn::diff(psn, w.last_psn) > 0) {
        drop(&qp, DropReason::BadResponse);
        return;
    }
    const Psn expected = w.first_psn + w.resp_pkts;
    if (Psn::diff(psn, expected) < 0) {
        drop(&qp, DropReason::StaleResponse);
        return;
    }
    if (Psn::diff(psn, expected) > 0) {
        // A response is missing: ask again from the first one not received.
        drop(&qp, DropReason::BadResponse);
        comp_retry(qp, expected, now, fx);
        return;
    }
    const uint32_t idx = w.resp_pkts;
    const bool last = idx + 1 == w.npkts;
    // A retried READ is answered as a new READ (FIRST again), so only where
    // the message ends is checked, not FIRST versus MIDDLE.
    const bool is_last = p.info().flags & kOpLast;
    const uint64_t off = uint64_t{idx} * qp.mtu;
    const uint64_t want_len = last ? w.length - off : qp.mtu;
    if (!(p.info().flags & kOpRead) || is_last != last || p.payload_len != want_len) {
        drop(&qp, DropReason::BadResponse);
        return;
    }
    if (p.payload_len) scatter_payload(p, w.wr.sg_list, off);
    ++w.resp_pkts;
    qp.comp_psn = psn + 1;
    if (last) {
        comp_complete_wqe(qp, w, WcStatus::Success, fx);
        ++qp.sq_comp;
    }
    comp_progress(qp, now, fx);
}

// Spraying: a READ response, in any order. Every response carries its PSN,
// and every one but the last exactly one MTU, so it is placed at once at
// (psn - first_psn) * mtu and flagged; the READ completes when the flags
// are contiguous. Responses of a later READ may arrive first too.
void Engine::comp_read_spray(Qp& qp, const wire::RocePacket& p, Nanos now, Effects& fx) {
    using namespace wire;
    const Psn psn = p.bth.psn;
    if (Psn::diff(psn, qp.comp_psn) < 0) {
        drop(&qp, DropReason::StaleResponse);
        return;
    }
    SendWqe* w = nullptr;
    for (uint32_t i = qp.sq_comp; i != qp.sq_head; ++i) {
        SendWqe& x = qp.wqe(i);
        if (!x.psn_assigned) break;
        if (Psn::diff(psn, x.first_psn) >= 0 && Psn::diff(psn, x.last_psn) <= 0) {
            w = &x;
            break;
        }
    }
    if (w == nullptr || w->wr.opcode != WrOpcode::RdmaRead) {
        drop(&qp, DropReason::BadResponse);
        return;
    }
    if (!qp.read_rcvd.contains(psn)) {
        // Beyond what can be tracked: asked for again when the hole is.
        drop(&qp, DropReason::OutOfWindow);
        if (qp.read_hole_deadline == Nanos::max()) qp.read_hole_deadline = now + cfg_.sack_delay;
        return;
    }
    const uint32_t idx = static_cast<uint32_t>(Psn::diff(psn, w->first_psn));
    if (idx < w->resp_pkts || qp.read_rcvd.test(psn)) {
        drop(&qp, DropReason::StaleResponse);
        return;
    }
    const bool last = idx + 1 == w->npkts;
    const uint64_t off = uint64_t{idx} * qp.mtu;
    const uint64_t want_len = last ? w->length - off : qp.mtu;
    if (bool(p.info().flags & kOpLast) != last || p.payload_len != want_len) {
        drop(&qp, DropReason::BadResponse);
        return;
    }
    if (p.payload_len) scatter_payload(p, w->wr.sg_list, off);
    qp.read_rcvd.set(psn);
    if (Psn::diff(psn, qp.read_highest) > 0) qp.read_highest = psn;
    // The responder answers in PSN order: a response means every request
    // before its READ was executed.
    if (Psn::diff(w->first_psn, qp.comp_psn) > 0) comp_ack_upto(qp, w->first_psn - 1, now, fx);
}

// Completes the oldest READs as far as their flagged responses reach.
void Engine::comp_read_drain(Qp& qp, Nanos now, Effects& fx) {
    while (qp.sq_comp != qp.sq_head && qp.state != QpState::Err) {
        SendWqe& w = qp.wqe(qp.sq_comp);
        if (!w.psn_assigned || w.wr.opcode != WrOpcode::RdmaRead || Psn::diff(w.first_psn, qp.comp_psn) > 0) return;
        const uint32_t before = w.resp_pkts;
        while (w.resp_pkts < w.npkts) {
            const Psn e = w.first_psn + w.resp_pkts;
            if (!qp.read_rcvd.contains(e) || !qp.read_rcvd.test(e)) break;
            ++w.resp_pkts;
        }
        if (w.resp_pkts == before) return;
        qp.comp_psn = w.first_psn + w.resp_pkts;
        // The hole that was timed has closed; a later one gets its own time.
        qp.read_hole_deadline = Nanos::max();
        const bool done = w.resp_pkts == w.npkts;
        if (done) {
            comp_complete_wqe(qp, w, WcStatus::Success, fx);
            ++qp.sq_comp;
        }
        comp_progress(qp, now, fx);
        if (!done) return;
    }
}

// Spraying, after every response: completes READs whose flagged responses
// are now contiguous and applies an ACK that was held back for them, until
// neither moves; a response still missing behind later ones is timed.
void Engine::comp_spray_settle(Qp& qp, Nanos now, Effects& fx) {
    for (;;) {
        const uint32_t sq_comp = qp.sq_comp;
        const Psn comp_psn = qp.comp_psn;
        comp_read_drain(qp, now, fx);
        if (qp.ack_pending && qp.state != QpState::Err) {
            qp.ack_pending = false;
            if (Psn::diff(qp.ack_pending_psn, qp.comp_psn) >= 0) comp_ack_upto(qp, qp.ack_pending_psn, now, fx);
        }
        if (qp.sq_comp == sq_comp && qp.comp_psn == comp_psn) break;
    }
    if ((qp.ack_pending || Psn::diff(qp.read_highest, qp.comp_psn) >= 0) && qp.read_hole_deadline == Nanos::max())
        qp.read_hole_deadline = now + cfg_.sack_delay;
}

}  // namespace rocemu::transport
