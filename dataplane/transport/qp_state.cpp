// The QP state machine: which transitions exist, which attributes each one
// requires or allows (the table of IBTA 11.2.5 / ib_modify_qp_is_ok), and
// what entering a state does to the requester, completer and responder.
#include <cerrno>

#include <fmt/format.h>

#include "dataplane/transport/engine.hpp"

namespace rocemu::transport {

namespace {

constexpr const char* kAttrNames[] = {
    "qp_state", "cur_qp_state", "en_sqd_async_notify", "qp_access_flags", "pkey_index", "port_num", "qkey",
    "ah_attr", "path_mtu", "timeout", "retry_cnt", "rnr_retry", "rq_psn", "max_rd_atomic", "alt_path",
    "min_rnr_timer", "sq_psn", "max_dest_rd_atomic", "path_mig_state", "cap", "dest_qp_num",
};

struct Rule {
    bool valid = false;
    uint32_t req[3] = {0, 0, 0};  // per QpType: Rc, Uc, Ud
    uint32_t opt[3] = {0, 0, 0};
};

constexpr int kStates = 7;

constexpr uint32_t kRtsOptRc = kAttrCurState | kAttrAccessFlags | kAttrAltPath | kAttrPathMigState | kAttrMinRnrTimer;
constexpr uint32_t kRtsOptUc = kAttrCurState | kAttrAccessFlags | kAttrAltPath | kAttrPathMigState;
constexpr uint32_t kRtsOptUd = kAttrCurState | kAttrQkey;

constexpr std::array<std::array<Rule, kStates>, kStates> make_rules() {
    std::array<std::array<Rule, kStates>, kStates> t{};
    auto at = [&](QpState a, QpState b) -> Rule& { return t[static_cast<int>(a)][static_cast<int>(b)]; };
    for (int s = 0; s < kStates; ++s) {
        t[s][static_cast<int>(QpState::Reset)].valid = true;
        t[s][static_cast<int>(QpState::Err)].valid = true;
    }
    at(QpState::Reset, QpState::Init) = {true,
                                         {kAttrPkeyIndex | kAttrPort | kAttrAccessFlags,
                                          kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, kAttrPkeyIndex | kAttrPort | kAttrQkey},
                                         {0, 0, 0}};
    at(QpState::Init, QpState::Init) = {true,
                                        {0, 0, 0},
                                        {kAttrPkeyIndex | kAttrPort | kAttrAccessFlags,
                                         kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, kAttrPkeyIndex | kAttrPort | kAttrQkey}};
    at(QpState::Init, QpState::Rtr) = {
        true,
        {kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer,
         kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn, 0},
        {kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex, kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex,
         kAttrPkeyIndex | kAttrQkey}};
    at(QpState::Rtr, QpState::Rts) = {
        true,
        {kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrSqPsn | kAttrMaxQpRdAtomic, kAttrSqPsn, kAttrSqPsn},
        {kRtsOptRc, kRtsOptUc, kRtsOptUd}};
    at(QpState::Rts, QpState::Rts) = {true, {0, 0, 0}, {kRtsOptRc, kRtsOptUc, kRtsOptUd}};
    at(QpState::Rts, QpState::Sqd) = {true, {0, 0, 0}, {kAttrEnSqdAsyncNotify, kAttrEnSqdAsyncNotify, kAttrEnSqdAsyncNotify}};
    at(QpState::Sqd, QpState::Rts) = {true, {0, 0, 0}, {kRtsOptRc, kRtsOptUc, kRtsOptUd}};
    at(QpState::Sqd, QpState::Sqd) = {
        true,
        {0, 0, 0},
        {kAttrAv | kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex | kAttrMinRnrTimer | kAttrPathMigState |
             kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic | kAttrMaxDestRdAtomic,
         kAttrAv | kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex | kAttrPathMigState,
         kAttrPkeyIndex | kAttrQkey}};
    // SQE exists only for UC and UD: an RC send error moves the QP to ERR.
    at(QpState::Sqe, QpState::Rts) = {true, {0, 0, 0}, {0, kAttrCurState | kAttrAccessFlags, kAttrCurState | kAttrQkey}};
    return t;
}

constexpr auto kRules = make_rules();

VerbsError err(const char* attr, std::string msg) { return VerbsError{EINVAL, attr, std::move(msg)}; }

}  // namespace

const char* attr_name(uint32_t bit) {
    for (uint32_t i = 0; i < std::size(kAttrNames); ++i)
        if (bit == (1u << i)) return kAttrNames[i];
    return "unknown";
}

VerbsError Engine::check_modify(const Qp& qp, const QpAttr& a, uint32_t mask) const {
    if (mask & ~uint32_t{kAttrMaskAll}) return err("attr_mask", fmt::format("attr_mask: unknown bits 0x{:x}", mask));
    const QpState cur = (mask & kAttrCurState) ? a.cur_qp_state : qp.state;
    if ((mask & kAttrCurState) && a.cur_qp_state != qp.state &&
        !(a.cur_qp_state == QpState::Sqe || a.cur_qp_state == QpState::Rts))
        return err("cur_qp_state", fmt::format("cur_qp_state: {} does not match the QP state {}",
                                               to_string(a.cur_qp_state), to_string(qp.state)));
    const QpState next = (mask & kAttrState) ? a.qp_state : cur;
    const Rule& r = kRules[static_cast<int>(cur)][static_cast<int>(next)];
    if (!r.valid)
        return err("qp_state", fmt::format("qp_state: {} -> {} is not a valid transition", to_string(cur), to_string(next)));
    const int t = static_cast<int>(qp.type);
    const uint32_t req = r.req[t], opt = r.opt[t];
    const uint32_t given = mask & ~uint32_t{kAttrState};
    if (next != QpState::Reset && next != QpState::Err) {
        if (const uint32_t missing = req & ~given) {
            const uint32_t bit = missing & (~missing + 1);
            return err(attr_name(bit), fmt::format("{}: required for {} -> {}", attr_name(bit), to_string(cur),
                                                   to_string(next)));
        }
        if (const uint32_t extra = given & ~(req | opt)) {
            const uint32_t bit = extra & (~extra + 1);
            return err(attr_name(bit), fmt::format("{}: not allowed for {} -> {}", attr_name(bit), to_string(cur),
                                                   to_string(next)));
        }
    }
    if ((mask & kAttrPort) && a.port_num != 1)
        return err("port_num", fmt::format("port_num: {} is outside [1, 1]", a.port_num));
    if ((mask & kAttrPkeyIndex) && a.pkey_index != 0)
        return err("pkey_index", fmt::format("pkey_index: {} is outside [0, 0]", a.pkey_index));
    if ((mask & kAttrAccessFlags) &&
        (a.qp_access_flags & ~uint32_t{kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic}))
        return err("qp_access_flags", fmt::format("qp_access_flags: 0x{:x} has unknown flags", a.qp_access_flags));
    if ((mask & kAttrPathMtu) &&
        (static_cast<uint8_t>(a.path_mtu) < 1 || static_cast<uint8_t>(a.path_mtu) > 5))
        return err("path_mtu", fmt::format("path_mtu: {} is outside [1 (256), 5 (4096)]",
                                           static_cast<int>(a.path_mtu)));
    if ((mask & kAttrTimeout) && a.timeout > 31)
        return err("timeout", fmt::format("timeout: {} is outside [0, 31]", a.timeout));
    if ((mask & kAttrRetryCnt) && a.retry_cnt > 7)
        return err("retry_cnt", fmt::format("retry_cnt: {} is outside [0, 7]", a.retry_cnt));
    if ((mask & kAttrRnrRetry) && a.rnr_retry > 7)
        return err("rnr_retry", fmt::format("rnr_retry: {} is outside [0, 7]", a.rnr_retry));
    if ((mask & kAttrMinRnrTimer) && a.min_rnr_timer > 31)
        return err("min_rnr_timer", fmt::format("min_rnr_timer: {} is outside [0, 31]", a.min_rnr_timer));
    if ((mask & kAttrMaxQpRdAtomic) && (a.max_rd_atomic < 1 || a.max_rd_atomic > 128))
        return err("max_rd_atomic", fmt::format("max_rd_atomic: {} is outside [1, 128]", a.max_rd_atomic));
    if ((mask & kAttrMaxDestRdAtomic) && (a.max_dest_rd_atomic < 1 || a.max_dest_rd_atomic > 128))
        return err("max_dest_rd_atomic",
                   fmt::format("max_dest_rd_atomic: {} is outside [1, 128]", a.max_dest_rd_atomic));
    if ((mask & kAttrAv) && a.ah_attr.sgid_index >= cfg_.gids.size())
        return err("ah_attr", fmt::format("ah_attr.sgid_index: {} is outside [0, {}]", a.ah_attr.sgid_index,
                                          cfg_.gids.size() - 1));
    if ((mask & kAttrDestQpn) && a.dest_qp_num.v == 0)
        return err("dest_qp_num", "dest_qp_num: 0 is outside [1, 0xFFFFFF]");
    return {};
}

VerbsError Engine::modify_qp(Qpn qpn, const QpAttr& attr, uint32_t mask, Effects& fx) {
    Qp* qp = find_qp(qpn);
    if (qp == nullptr) return VerbsError{EINVAL, "qp", "unknown QP"};
    if (auto e = check_modify(*qp, attr, mask)) return e;
    apply_modify(*qp, attr, mask, fx);
    return {};
}

VerbsError Engine::query_qp(Qpn qpn, QpAttr& attr, QpInitAttr& init) const {
    const Qp* qp = find_qp(qpn);
    if (qp == nullptr) return VerbsError{EINVAL, "qp", "unknown QP"};
    attr = qp->attr;
    attr.qp_state = attr.cur_qp_state = qp->state;
    attr.sq_psn = qp->next_psn;
    attr.rq_psn = qp->epsn;
    init = qp->init;
    return {};
}

void Engine::reset_qp(Qp& q) {
    q.state = QpState::Reset;
    q.attr = QpAttr{};
    q.sq_head = q.sq_comp = q.sq_req = q.req_pkt = 0;
    q.rd_atomic_inflight = q.noack_pkts = 0;
    q.rto_deadline = q.rnr_deadline = q.read_hole_deadline = Nanos::max();
    q.ack_pending = false;
    q.in_msg = q.msg_has_wqe = q.nak_sent = q.cnp_pending = false;
    q.msn = 0;
    q.out_head = q.out_tail = 0;
    q.rexmit_head = q.rexmit_tail = 0;
    q.rq.head = q.rq.tail = 0;
    q.resources.assign(1, RespResource{});
    q.res_next = 0;
    // A used slot's PSN is flagged in `ooo`: only those slots are read and
    // written, so the rest of the reorder buffer stays uncommitted.
    for (uint32_t i = 0; i < q.ooo.size(); ++i)
        if (const Psn p = q.ooo.base() + i; q.ooo.test(p)) q.held(p).used = false;
    q.path_penalty.fill(0);
}

void Engine::apply_modify(Qp& q, const QpAttr& a, uint32_t mask, Effects& fx) {
    q.data_tpl.reset();
    q.ctl_tpl.reset();
    if (mask & kAttrAccessFlags) q.attr.qp_access_flags = a.qp_access_flags;
    if (mask & kAttrQkey) q.attr.qkey = a.qkey;
    if (mask & kAttrAv) q.attr.ah_attr = a.ah_attr;
    if (mask & kAttrPathMtu) {
        q.attr.path_mtu = a.path_mtu;
        q.mtu = mtu_bytes(a.path_mtu);
    }
    if (mask & kAttrTimeout) q.attr.timeout = a.timeout;
    if (mask & kAttrRetryCnt) q.attr.retry_cnt = q.retry_left = a.retry_cnt;
    if (mask & kAttrRnrRetry) q.attr.rnr_retry = q.rnr_left = a.rnr_retry;
    if (mask & kAttrMinRnrTimer) q.attr.min_rnr_timer = a.min_rnr_timer;
    if (mask & kAttrMaxQpRdAtomic) q.attr.max_rd_atomic = a.max_rd_atomic;
    if (mask & kAttrMaxDestRdAtomic) {
        q.attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
        q.resources.assign(a.max_dest_rd_atomic, RespResource{});
        q.res_next = 0;
    }
    if (mask & kAttrDestQpn) q.attr.dest_qp_num = a.dest_qp_num;
    if (mask & kAttrRqPsn) {
        q.attr.rq_psn = q.epsn = a.rq_psn;
        q.sack_deadline = Nanos::max();
        q.highest_rcvd = a.rq_psn - 1;
        if (q.spraying()) q.ooo.reset(a.rq_psn);
    }
    if (mask & kAttrSqPsn) {
        q.attr.sq_psn = q.next_psn = q.comp_psn = a.sq_psn;
        if (q.spraying()) {
            q.rexmit_pending.reset(a.sq_psn);
            q.read_rcvd.reset(a.sq_psn);
            q.read_highest = a.sq_psn - 1;
        }
    }
    if ((mask & (kAttrAv | kAttrDestQpn)) && q.type != QpType::Ud) {
        q.sport = q.attr.ah_attr.udp_sport != 0
                      ? q.attr.ah_attr.udp_sport
                      : rxe_udp_sport(q.qpn, q.attr.dest_qp_num, q.attr.ah_attr.flow_label);
        // Spraying paths: distinct source ports around the QP's own, all in the RoCEv2 range.
        for (uint32_t i = 0; i < q.path_sport.size(); ++i)
            q.path_sport[i] = static_cast<uint16_t>(0xC000 | ((q.sport + i * 0x9E5u) & 0x3FFF));
    }
    if (q.type == QpType::Ud && q.sport == 0xC000) q.sport = rxe_udp_sport(q.qpn, q.qpn);

    if (!(mask & kAttrState)) return;
    const QpState next = a.qp_state;
    if (next == QpState::Reset) {
        reset_qp(q);
        return;
    }
    if (next == QpState::Err) {
        enter_error(q, fx);
        return;
    }
    q.state = next;
}

void Engine::enter_error(Qp& q, Effects& fx) {
    q.state = QpState::Err;
    q.rto_deadline = q.rnr_deadline = Nanos::max();
    q.out_head = q.out_tail = 0;
    q.in_msg = false;
    flush(q, fx);
}

// Completes every outstanding WQE with WR_FLUSH_ERR: send WQEs in order on the
// send CQ, then the QP's own RECVs (an SRQ keeps its WQEs for other QPs).
void Engine::flush(Qp& q, Effects& fx) {
    while (q.sq_comp != q.sq_head) {
        SendWqe& w = q.wqe(q.sq_comp);
        Wc wc;
        wc.wr_id = w.wr.wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.qp_num = q.qpn;
        complete(q, q.init.send_cq.id, wc, fx);
        ++q.sq_comp;
    }
    q.sq_req = q.sq_comp;
    q.req_pkt = 0;
    q.rd_atomic_inflight = 0;
    if (q.msg_has_wqe) {
        Wc wc;
        wc.wr_id = q.msg_wqe.wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.opcode = WcOpcode::Recv;
        wc.qp_num = q.qpn;
        complete(q, q.init.recv_cq.id, wc, fx);
        q.msg_has_wqe = false;
    }
    if (q.init.srq.id == 0) {
        while (!q.rq.empty()) {
            Wc wc;
            wc.wr_id = q.rq.front().wr_id;
            wc.status = WcStatus::WrFlushErr;
            wc.opcode = WcOpcode::Recv;
            wc.qp_num = q.qpn;
            complete(q, q.init.recv_cq.id, wc, fx);
            q.rq.pop();
        }
    }
}

}  // namespace rocemu::transport
