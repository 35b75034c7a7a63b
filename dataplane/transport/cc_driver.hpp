// Plugs cc/'s per-QP congestion control into the engine's hooks, for
// runtimes that want DCQCN without wiring it themselves: after each
// tx_burst it charges every data frame to its QP's cc::QpCc and moves the
// engine's pacing gate to next_send_time(); CNPs the engine reports go to
// on_cnp; cc's own timers run from on_timer. One driver per engine.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "cc/cc.hpp"
#include "dataplane/transport/engine.hpp"

namespace rocemu::transport {

class CcDriver {
public:
    // `cfg` must outlive the driver. `slack` lets a QP run that far ahead of
    // its pacing schedule: a runtime that reads its clock once per burst
    // (the DPDK loop) can then send a burst at the QP's rate instead of one
    // frame per clock read; the long-run rate is unchanged.
    CcDriver(Engine& engine, const cc::CcConfig& cfg, BitsPerSec line_rate, Nanos slack = Nanos{0})
        : eng_(engine), cfg_(cfg), line_rate_(line_rate), slack_(slack) {}

    // Gives a requester QP its own congestion control.
    void attach(Qpn qpn);
    void detach(Qpn qpn);
    const cc::QpCc* qp_cc(Qpn qpn) const;

    // Call with the frames tx_burst just filled.
    void after_tx(std::span<const TxFrame> frames, Nanos now);
    // Call with the Effects of on_frame (CNPs received).
    void after_rx(const Effects& fx, Nanos now);
    void on_timer(Nanos now);
    Nanos next_timer() const;

private:
    cc::QpCc* find(Qpn qpn);
    void regate(Qpn qpn, const cc::QpCc& c);

    Engine& eng_;
    const cc::CcConfig& cfg_;
    BitsPerSec line_rate_;
    Nanos slack_;
    std::vector<std::unique_ptr<cc::QpCc>> by_qp_;  // index = qpn - Engine::kFirstQpn
};

}  // namespace rocemu::transport
