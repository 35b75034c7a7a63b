// Receive dispatch, as rxe_recv.c: parse and verify the frame, check P_Key,
// destination GID, QPN, QP state, opcode class and addresses, note ECN-CE
// (and owe the sender a CNP), then hand requests to the responder and
// responses to the completer. Every rejected frame is a counted drop.
#include "dataplane/transport/engine.hpp"
#include <cstring>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/crc_zero.hpp"
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

uint32_t Engine::rx_header_state(const uint8_t* l3, size_t hdr, bool v6) {
    if (v6) return wire::icrc_begin(l3, hdr, true);
    if (hdr == wire::RxIcrc::kLen) return rx_icrc_.state(l3);
    return wire::crc32_update(rx_icrc_.state(l3), l3 + wire::RxIcrc::kLen, hdr - wire::RxIcrc::kLen);
}

void Engine::on_frame(std::span<const uint8_t> frame, Nanos now, Effects& fx, size_t zero_from) {
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
    rx_l3_ = l3;
    const size_t icrc_len = p.frame_len - wire::kIcrcLen - p.l3_off;
    // A payload the caller knows to be zero (with its pad) is not read: its
    // ICRC share is computed, placement writes zeros, and whatever copies it
    // later (a WRITE's first packet, a SEND, a staged packet) reads a
    // constant page of zeros instead. Below a fused copy's size reading it
    // costs less than computing its CRC.
    static constexpr uint8_t kZeros[4096] = {};
    const bool zeros = p.payload_len >= FrameWriter::kFusedFrom && p.payload_len <= sizeof(kZeros) &&
                       static_cast<size_t>(p.payload - frame.data()) >= zero_from;
    uint32_t icrc;
    if (zeros) {
        const size_t hdr = static_cast<size_t>(p.payload - l3);
        icrc = ~wire::crc32_zeros(rx_header_state(l3, hdr, p.l3.v6), icrc_len - hdr);
        if (placed) std::memset(dst, 0, p.payload_len);
        p.payload = kZeros;
    } else if (placed) {
        // Staged payload stays in cache for the drain that places it; host
        // memory takes streaming stores unless its MR fits the cache
        // (EngineConfig::cached_write_max).
        const size_t hdr = static_cast<size_t>(p.payload - l3);
        const uint32_t st0 = rx_header_state(l3, hdr, p.l3.v6);
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
    if (staged) {
        p.payload = dst;
        placed = false;
    }
    rx_deliver(p, placed, now, fx);
}

void Engine::on_frame_chain(FrameSegs segs, Nanos now, Effects& fx) {
    if (segs.size() == 1) return on_frame(segs[0], now, fx);
    size_t total = 0;
    for (const std::span<const uint8_t> s : segs) total += s.size();
    wire::RocePacket& p = rx_pkt_;
    const wire::ParseError pe = wire::parse_roce_split(segs[0], total, p);
    if (pe != wire::ParseError::Ok) {
        drop(nullptr, pe == wire::ParseError::SplitHeaders ? DropReason::SplitHeaders : DropReason::ParseError);
        return;
    }
    const size_t pay_off = p.bth_off + size_t{p.info().hdr_len};
    const size_t icrc_off = p.frame_len - wire::kIcrcLen;
    uint8_t carried[wire::kIcrcLen];
    for_each_piece(segs, icrc_off, wire::kIcrcLen, [&](const uint8_t* b, size_t n, size_t pos) {
        std::memcpy(carried + pos, b, n);
        return true;
    });
    p.icrc = wire::load_le32(carried);
    uint8_t* dst = nullptr;
    bool staged = false;
    const Qp* target = resp_place_target(p, dst, staged);
    bool placed = target != nullptr;
    rx_l3_ = segs[0].data() + p.l3_off;
    uint32_t st = rx_header_state(rx_l3_, pay_off - p.l3_off, p.l3.v6);
    const bool cached = placed && (staged || target->write_cached);
    for_each_piece(segs, pay_off, icrc_off - pay_off, [&](const uint8_t* b, size_t n, size_t pos) {
        const size_t put = placed && pos < p.payload_len ? std::min<size_t>(n, p.payload_len - pos) : 0;
        if (put) st = cached ? wire::crc32_copy(st, dst + pos, b, put, b + put) : wire::crc32_place(st, dst + pos, b, put);
        st = wire::crc32_update(st, b + put, n - put);
        return true;
    });
    if (~st != p.icrc) {
        drop(nullptr, DropReason::BadIcrc);
        return;
    }
    if (staged) {
        p.payload = dst;
        placed = false;
    } else if (p.payload_len) {
        // A payload within one segment is read where it lies, as a flat
        // frame's; one across segments is walked by for_payload.
        size_t off = pay_off;
        for (const std::span<const uint8_t> s : segs) {
            if (off < s.size()) {
                if (off + p.payload_len <= s.size()) p.payload = s.data() + off;
                break;
            }
            off -= s.size();
        }
    }
    rx_segs_ = segs;
    rx_pay_off_ = pay_off;
    rx_deliver(p, placed, now, fx);
    rx_segs_ = {};
}

void Engine::rx_deliver(wire::RocePacket& p, bool placed, Nanos now, Effects& fx) {
    ++counters_.rcvd_pkts;
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
