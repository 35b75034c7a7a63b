#include "dataplane/transport/cc_driver.hpp"

namespace rocemu::transport {

void CcDriver::attach(Qpn qpn) {
    const uint32_t i = qpn.v - Engine::kFirstQpn;
    if (i >= by_qp_.size()) by_qp_.resize(i + 1);
    by_qp_[i] = std::make_unique<cc::QpCc>(cfg_, line_rate_);
    regate(qpn, *by_qp_[i]);
}

void CcDriver::detach(Qpn qpn) {
    if (find(qpn) != nullptr) {
        by_qp_[qpn.v - Engine::kFirstQpn].reset();
        eng_.set_next_send(qpn, Nanos{0});
    }
}

cc::QpCc* CcDriver::find(Qpn qpn) {
    const uint32_t i = qpn.v - Engine::kFirstQpn;
    return qpn.v >= Engine::kFirstQpn && i < by_qp_.size() ? by_qp_[i].get() : nullptr;
}

const cc::QpCc* CcDriver::qp_cc(Qpn qpn) const { return const_cast<CcDriver*>(this)->find(qpn); }

void CcDriver::regate(Qpn qpn, const cc::QpCc& c) { eng_.set_next_send(qpn, c.next_send_time() - slack_); }

void CcDriver::after_tx(std::span<const TxFrame> frames, Nanos now) {
    for (const TxFrame& f : frames) {
        if (!f.data) continue;
        if (cc::QpCc* c = find(f.qpn)) {
            c->on_tx(Bytes{f.wire_len()}, now);
            regate(f.qpn, *c);
        }
    }
}

void CcDriver::after_rx(const Effects& fx, Nanos now) {
    for (const Qpn q : fx.cnp_received) {
        if (cc::QpCc* c = find(q)) {
            c->on_cnp(now);
            regate(q, *c);
        }
    }
}

void CcDriver::on_timer(Nanos now) {
    for (size_t i = 0; i < by_qp_.size(); ++i) {
        cc::QpCc* c = by_qp_[i].get();
        if (c == nullptr || c->next_timer() > now) continue;
        c->on_timer(now);
        regate(Qpn{static_cast<uint32_t>(i + Engine::kFirstQpn)}, *c);
    }
}

Nanos CcDriver::next_timer() const {
    Nanos t = Nanos::max();
    for (const auto& c : by_qp_)
        if (c && c->next_timer() < t) t = c->next_timer();
    return t;
}

}  // namespace rocemu::transport
