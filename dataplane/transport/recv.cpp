// Receive dispatch, as rxe_recv.c: parse and verify the frame, check P_Key,
// destination GID, QPN, QP state, opcode class and addresses, note ECN-CE
// (and owe the sender a CNP), then hand requests to the responder and
// responses to the completer. Every rejected frame is a counted drop.
#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::transport {

namespace {

wire::QpClass class_of(QpType t) {
    switch (t) {
        case QpType::Rc: return wire::QpClass::Rc;
        case QpType::Uc: return wire::QpClass::Uc;
        case QpType::Ud: return wire::QpClass::Ud;
    }
    return wire::QpClass::None;
}

}  // namespace

void Engine::on_frame(std::span<const uint8_t> frame, Nanos now, Effects& fx) {
    // parse_roce writes every field: the engine's receive packet is reused.
    wire::RocePacket& p = rx_pkt_;
    const wire::ParseError pe = wire::parse_roce(frame, p, {.verify_icrc = false});
    if (pe != wire::ParseError::Ok) {
        drop(nullptr, DropReason::ParseError);
        return;
    }
    uint8_t* dst = nullptr;
    bool staged = false;
    const Qp* target = resp_place_target(p, dst, staged);
    bool placed = target != nullptr;
    const uint8_t* l3 = frame.data() + p.l3_off;
    const size_t icrc_len = p.frame_len - wire::kIcrcLen - p.l3_off;
    uint32_t icrc;
    if (placed) {
        // Staged payload stays in cache for the drain that places it; host
        // memory takes streaming stores unless its MR fits the cache
        // (EngineConfig::cached_write_max).
        const size_t hdr = static_cast<size_t>(p.payload - l3);
        uint32_t st0;
        if (p.l3.v6) st0 = wire::icrc_begin(l3, hdr, true);
        else if (hdr == wire::RxIcrc::kLen) st0 = rx_icrc_.state(l3);
        else st0 = wire::crc32_update(rx_icrc_.state(l3), l3 + wire::RxIcrc::kLen, hdr - wire::RxIcrc::kLen);
        const uint8_t* end = p.payload + p.payload_len;
        const uint32_t st = staged || target->write_cached
                                ? wire::crc32_copy(st0, dst, p.payload, p.payload_len, end)
                                : wire::crc32_place(st0, dst, p.payload, p.payload_len);
        icrc = ~wire::crc32_update(st, end, icrc_len - hdr - p.payload_len);
    } else if (p.bth.opcode == wire::op::ACKNOWLEDGE && !p.l3.v6) {
        icrc = rx_ack_icrc_(l3);
    } else if (!p.l3.v6) {
        icrc = rx_icrc_(l3, icrc_len);
    } else {
        icrc = wire::compute_icrc(l3, icrc_len, true);
    }
    if (icrc != p.icrc) {
        drop(nullptr, DropReason::BadIcrc);
        return;
    }
    ++counters_.rcvd_pkts;
    if (staged) {
        p.payload = dst;
        placed = false;
    }
    if (p.bth.pkey != wire::kDefaultPkey) {
        drop(nullptr, DropReason::BadPkey);
        return;
    }
    if (!local_gid(p.l3.dst)) {
        drop(nullptr, DropReason::NotForUs);
        return;
    }
    Qp* qp = find_qp(p.bth.dqpn);
    if (qp == nullptr) {
        drop(nullptr, DropReason::UnknownQpn);
        return;
    }
    ++qp->counters.rcvd_pkts;
    const wire::OpcodeInfo& info = p.info();
    if (info.flags & wire::kOpCnp) {
        ++qp->counters.rp_cnp_handled;
        ++counters_.rp_cnp_handled;
        fx.cnp_received.push_back(qp->qpn);
        return;
    }
    if (qp->state == QpState::Reset || qp->state == QpState::Init) {
        drop(qp, DropReason::QpState);
        return;
    }
    if (qp->state == QpState::Err) {
        drop(qp, DropReason::QpError);
        return;
    }
    if (info.cls != class_of(qp->type)) {
        drop(qp, DropReason::WrongQpClass);
        return;
    }
    if (qp->type != QpType::Ud && !(p.l3.src == qp->attr.ah_attr.dgid)) {
        drop(qp, DropReason::AddressMismatch);
        return;
    }
    if (p.l3.ecn == wire::ecn::kCe) {
        ++qp->counters.np_ecn_marked_roce_packets;
        ++counters_.np_ecn_marked_roce_packets;
        if (qp->init.peer_accepts_cnp &&
            (qp->last_cnp_sent.v < 0 || now - qp->last_cnp_sent >= cfg_.min_time_between_cnps)) {
            qp->cnp_pending = true;
            qp->cnp_dqpn = qp->type == QpType::Ud ? p.deth.src_qp : qp->attr.dest_qp_num;
            qp->last_cnp_sent = now;
        }
    }
    if (info.flags & wire::kOpRequest) {
        if (qp->type == QpType::Ud) resp_ud(*qp, p, fx);
        else resp_rx(*qp, p, placed, now, fx);
    } else if (qp->state == QpState::Rtr) {
        drop(qp, DropReason::QpState);
    } else {
        comp_rx(*qp, p, now, fx);
        if (qp->spraying()) comp_spray_settle(*qp, now, fx);
    }
}

}  // namespace rocemu::transport
