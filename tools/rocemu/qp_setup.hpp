// The QP bring-up the interop commands (pingpong, rdma-ops) share, with the
// attributes of ibv_rc_pingpong's pp_connect_ctx: RESET -> INIT, then for RC
// INIT -> RTR -> RTS.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "verbs/verbs.hpp"

namespace rocemu::cli {

// RESET -> INIT on pkey index 0 and port 1: an RC QP with `access` flags, or,
// with `ud_qkey`, a UD QP with that Q_Key. Returns what modify_qp returns.
inline int modify_qp_to_init(verbs::Context& ctx, Qpn qpn, uint32_t access,
                             std::optional<uint32_t> ud_qkey = std::nullopt) {
    transport::QpAttr a;
    a.qp_state = transport::QpState::Init;
    a.pkey_index = 0;
    a.port_num = 1;
    uint32_t mask = transport::kAttrState | transport::kAttrPkeyIndex | transport::kAttrPort;
    if (ud_qkey) {
        a.qkey = *ud_qkey;
        mask |= transport::kAttrQkey;
    } else {
        a.qp_access_flags = access;
        mask |= transport::kAttrAccessFlags;
    }
    return ctx.modify_qp(qpn, a, mask);
}

// Where an RC QP connects to: the peer's QP and first PSN, the path to it, and
// this side's first PSN.
struct RcPeer {
    transport::PathMtu mtu = transport::PathMtu::Mtu1024;
    transport::AddressVector av;
    Qpn dest_qpn;
    Psn rq_psn;  // the peer's first PSN
    Psn sq_psn;  // ours
};

// INIT -> RTR -> RTS (one outstanding READ/atomic each way, RNR timer 12,
// timeout 14, retry and RNR retry 7). Empty on success, otherwise the failed
// step's `rtr_error` or `rts_error` followed by the context's last error.
inline std::string connect_rc_qp(verbs::Context& ctx, Qpn qpn, const RcPeer& peer, std::string_view rtr_error,
                                 std::string_view rts_error) {
    transport::QpAttr a;
    a.qp_state = transport::QpState::Rtr;
    a.path_mtu = peer.mtu;
    a.dest_qp_num = peer.dest_qpn;
    a.rq_psn = peer.rq_psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr = peer.av;
    if (ctx.modify_qp(qpn, a,
                      transport::kAttrState | transport::kAttrAv | transport::kAttrPathMtu | transport::kAttrDestQpn |
                          transport::kAttrRqPsn | transport::kAttrMaxDestRdAtomic | transport::kAttrMinRnrTimer))
        return std::string(rtr_error) + ctx.last_error();
    a.qp_state = transport::QpState::Rts;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = peer.sq_psn;
    a.max_rd_atomic = 1;
    if (ctx.modify_qp(qpn, a,
                      transport::kAttrState | transport::kAttrTimeout | transport::kAttrRetryCnt |
                          transport::kAttrRnrRetry | transport::kAttrSqPsn | transport::kAttrMaxQpRdAtomic))
        return std::string(rts_error) + ctx.last_error();
    return {};
}

}  // namespace rocemu::cli
