// Brings an RC QP of a transport engine to RTS for the transport fuzz
// targets: INIT with remote write/read/atomic access, RTR towards QPN 0x11
// at `peer` (path MTU 1024, receive PSN 0, 4 responder READ/atomic slots),
// then RTS with the send-side attributes of `rts` (sq_psn, timeout,
// retry_cnt, rnr_retry, max_rd_atomic).
#pragma once

#include "dataplane/transport/engine.hpp"

namespace rocemu::fuzz {

inline transport::VerbsError rc_to_rts(transport::Engine& eng, Qpn qpn, const wire::IpAddr& peer,
                                       transport::QpAttr rts, transport::Effects& fx) {
    using namespace transport;
    QpAttr a;
    a.qp_state = QpState::Init;
    a.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
    if (VerbsError e = eng.modify_qp(qpn, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, fx); e.err)
        return e;
    a.qp_state = QpState::Rtr;
    a.path_mtu = PathMtu::Mtu1024;
    a.dest_qp_num = Qpn{0x11};
    a.rq_psn = Psn{0};
    a.max_dest_rd_atomic = 4;
    a.ah_attr.dgid = peer;
    if (VerbsError e = eng.modify_qp(qpn, a,
                                     kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                         kAttrMaxDestRdAtomic | kAttrMinRnrTimer,
                                     fx);
        e.err)
        return e;
    rts.qp_state = QpState::Rts;
    return eng.modify_qp(qpn, rts,
                         kAttrState | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrSqPsn | kAttrMaxQpRdAtomic,
                         fx);
}

}  // namespace rocemu::fuzz
