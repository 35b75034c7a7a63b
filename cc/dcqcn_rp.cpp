#include "cc/dcqcn_rp.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace rocemu::cc {

DcqcnRp::DcqcnRp(const DcqcnConfig& cfg, BitsPerSec line_rate)
    : cfg_(&cfg),
      max_rate_(cfg.rpg_max_rate.v == 0 ? line_rate : std::min(cfg.rpg_max_rate, line_rate)),
      byte_reset_(cfg.effective_byte_reset().v),
      pacer_(max_rate_),
      target_(max_rate_) {}

void DcqcnRp::on_tx(Bytes wire_bytes, Nanos now) {
    pacer_.on_tx(wire_bytes, now);
    if (!active_ || byte_reset_ == 0) return;
    bytes_since_ += wire_bytes.v;
    while (active_ && bytes_since_ >= byte_reset_) {
        bytes_since_ -= byte_reset_;
        ++byte_stage_;
        increase();
    }
}

void DcqcnRp::on_cnp(Nanos now) {
    ++counters_.cnp_handled;
    if (!active_) {
        // First CNP of a congestion episode: alpha starts from its initial
        // value and its update periods are phased from this moment. The CNP
        // itself does not count as an arrival for the first period.
        active_ = true;
        alpha_ = cfg_->initial_alpha_value;
        alpha_cnp_ = false;
        alpha_next_ = now + cfg_->dce_tcp_rtt;
        target_ = rate();
        if (cfg_->rate_to_set_on_first_cnp.v != 0) {
            const BitsPerSec r = std::max(std::min(cfg_->rate_to_set_on_first_cnp, rate()), cfg_->rpg_min_rate);
            target_ = r;
            set_rate(r);
            ++counters_.rate_decreases;
            last_cut_ = now;
            timer_stage_ = byte_stage_ = 0;
            bytes_since_ = 0;
            inc_due_ = now + cfg_->rpg_time_reset;
        } else {
            cut(now);
        }
        return;
    }
    advance_alpha(now);
    alpha_cnp_ = true;
    if (now >= last_cut_ + cfg_->rate_reduce_monitor_period) {
        cut(now);
    } else if (cut_due_ == Nanos::max()) {
        ++counters_.cnp_deferred;
        cut_due_ = last_cut_ + cfg_->rate_reduce_monitor_period;
    } else {
        ++counters_.cnp_deferred;
    }
}

void DcqcnRp::on_timer(Nanos now) {
    for (;;) {
        const Nanos t = next_timer();
        if (t > now) return;
        if (cut_due_ <= inc_due_) {
            cut(cut_due_);
        } else {
            inc_due_ += cfg_->rpg_time_reset;
            ++timer_stage_;
            increase();
        }
    }
}

uint32_t DcqcnRp::alpha(Nanos now) {
    if (active_) advance_alpha(now);
    return alpha_;
}

void DcqcnRp::advance_alpha(Nanos to) {
    const uint32_t g = cfg_->dce_tcp_g;
    const Nanos period = cfg_->dce_tcp_rtt;
    while (alpha_next_ <= to) {
        const uint32_t decayed = (alpha_ * g) >> 10;
        alpha_ = alpha_cnp_ ? std::min(decayed + (kAlphaOne - g), kAlphaMax) : decayed;
        alpha_cnp_ = false;
        alpha_next_ += period;
        if (alpha_ == 0) {
            // Zero is a fixed point without CNPs: skip the remaining periods.
            if (alpha_next_ <= to) alpha_next_ += period * ((to - alpha_next_).v / period.v + 1);
            return;
        }
    }
}

void DcqcnRp::cut(Nanos at) {
    advance_alpha(at);
    if (cfg_->clamp_tgt_rate || (cfg_->clamp_tgt_rate_after_time_inc && timer_stage_ > 0)) target_ = rate();
    const uint64_t cur = rate().v;
    const uint64_t dec = static_cast<uint64_t>((static_cast<unsigned __int128>(cur) * alpha_) >> cfg_->rpg_gd);
    const uint64_t by_alpha = cur - std::min(dec, cur);
    const uint64_t floor_dec = static_cast<uint64_t>(static_cast<unsigned __int128>(cur) * cfg_->rpg_min_dec_fac / 100);
    const uint64_t next = std::max({by_alpha, floor_dec, cfg_->rpg_min_rate.v});
    set_rate(BitsPerSec{std::min(next, cur)});
    ++counters_.rate_decreases;
    last_cut_ = at;
    cut_due_ = Nanos::max();
    timer_stage_ = byte_stage_ = 0;
    bytes_since_ = 0;
    inc_due_ = at + cfg_->rpg_time_reset;
}

std::string DcqcnRp::dump() const {
    static constexpr const char* kPhase[] = {"fast-recovery", "additive", "hyper"};
    return fmt::format(
        "dcqcn rp: {} rate {:.3f} Gb/s target {:.3f} Gb/s alpha {}/1024 T {} B {} {} | cnp {} deferred {} cuts {} "
        "increases {}",
        active_ ? "limited" : "released", rate().as_gbps(), target_.as_gbps(), alpha_, timer_stage_, byte_stage_,
        kPhase[static_cast<int>(phase())], counters_.cnp_handled, counters_.cnp_deferred, counters_.rate_decreases,
        counters_.rate_increases);
}

IncreasePhase DcqcnRp::phase() const {
    const uint32_t hi = byte_reset_ == 0 ? timer_stage_ : std::max(timer_stage_, byte_stage_);
    const uint32_t lo = byte_reset_ == 0 ? timer_stage_ : std::min(timer_stage_, byte_stage_);
    const uint32_t f = cfg_->rpg_threshold;
    if (hi <= f) return IncreasePhase::kFastRecovery;
    if (lo <= f) return IncreasePhase::kAdditive;
    return IncreasePhase::kHyper;
}

void DcqcnRp::increase() {
    ++counters_.rate_increases;
    switch (phase()) {
        case IncreasePhase::kFastRecovery: break;
        case IncreasePhase::kAdditive: target_ = std::min(BitsPerSec{target_.v + cfg_->rpg_ai_rate.v}, max_rate_); break;
        case IncreasePhase::kHyper: target_ = std::min(BitsPerSec{target_.v + cfg_->rpg_hai_rate.v}, max_rate_); break;
    }
    // Rounding up lets the rate reach the target instead of stalling 1 b/s short.
    set_rate(BitsPerSec{(rate().v + target_.v + 1) / 2});
    if (rate() == max_rate_ && cut_due_ == Nanos::max()) {
        active_ = false;
        cut_due_ = inc_due_ = Nanos::max();
        alpha_next_ = Nanos::max();
    }
}

}  // namespace rocemu::cc
