// DCQCN reaction point for one QP (the sender side), as ConnectX firmware
// behaves. Pure: time comes in as `now`, and the object tells its caller when
// it next needs on_timer(). The exact rules are in cc/README.md.
#pragma once

#include <cstdint>
#include <string>

#include "cc/config.hpp"
#include "cc/pacer.hpp"
#include "common/units.hpp"

namespace rocemu::cc {

// What a window- or RTT-based algorithm learns from an ACK. DCQCN ignores it.
struct AckInfo {
    Bytes acked{0};
    Nanos rtt{0};
};

struct RpCounters {
    uint64_t cnp_handled = 0;
    uint64_t rate_decreases = 0;
    uint64_t rate_increases = 0;
    uint64_t cnp_deferred = 0;  // CNPs that arrived inside rate_reduce_monitor_period
};

enum class IncreasePhase : uint8_t { kFastRecovery, kAdditive, kHyper };

class DcqcnRp {
public:
    static constexpr uint32_t kAlphaOne = 1024;
    static constexpr uint32_t kAlphaMax = 1023;

    // `cfg` is shared by every QP of a port and must outlive this object.
    DcqcnRp(const DcqcnConfig& cfg, BitsPerSec line_rate);

    void on_tx(Bytes wire_bytes, Nanos now);
    void on_cnp(Nanos now);
    void on_ack(const AckInfo&, Nanos) {}
    void on_timer(Nanos now);

    Nanos next_send_time() const { return pacer_.next_send_time(); }
    Nanos next_timer() const { return cut_due_ < inc_due_ ? cut_due_ : inc_due_; }
    BitsPerSec rate() const { return pacer_.rate(); }
    BitsPerSec target_rate() const { return target_; }
    Bytes window() const { return Bytes{UINT64_MAX}; }

    // Alpha in 1/1024 units, with the alpha-update periods up to `now` applied.
    // Periods are applied lazily: only alpha's value at a cut matters.
    uint32_t alpha(Nanos now);
    bool rate_limited() const { return active_; }
    uint32_t timer_stage() const { return timer_stage_; }
    uint32_t byte_stage() const { return byte_stage_; }
    IncreasePhase phase() const;
    const RpCounters& counters() const { return counters_; }
    // One line of state and counters, for logs.
    std::string dump() const;

private:
    void cut(Nanos at);
    void advance_alpha(Nanos to);
    void increase();
    void set_rate(BitsPerSec r) { pacer_.set_rate(r); }

    const DcqcnConfig* cfg_;
    BitsPerSec max_rate_;
    uint64_t byte_reset_;
    Pacer pacer_;
    BitsPerSec target_;
    bool active_ = false;
    bool alpha_cnp_ = false;
    uint32_t alpha_ = 0;
    Nanos alpha_next_ = Nanos::max();
    Nanos last_cut_{0};
    Nanos cut_due_ = Nanos::max();
    Nanos inc_due_ = Nanos::max();
    uint32_t timer_stage_ = 0;
    uint32_t byte_stage_ = 0;
    uint64_t bytes_since_ = 0;
    RpCounters counters_;
};

}  // namespace rocemu::cc
