#include "link/link.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace rocemu::link {

namespace {

// Speeds outside this range are not links anyone builds; the upper bound
// also keeps the picosecond arithmetic of any frame under 1 MiB within 64
// bits.
constexpr uint64_t kMinSpeed = 1000000ull;         // 1 Mbit/s
constexpr uint64_t kMaxSpeed = 10000000000000ull;  // 10 Tbit/s
constexpr int64_t kMaxDelay = 1000000000;          // 1 s
constexpr uint64_t kMaxWireOverhead = 64;

std::string delay_error(const std::string& key, Nanos v) {
    if (v.v >= 0 && v.v <= kMaxDelay) return {};
    return fmt::format("LINK.{}: {} out of range [0, {}]", key, v.v, kMaxDelay);
}

std::string rate_error(const char* key, double p) {
    if (std::isfinite(p) && p >= 0.0 && p <= 1.0) return {};
    return fmt::format("LINK.{}: {} out of range [0, 1]", key, p);
}

}  // namespace

std::string validate(const Config& cfg) {
    if (cfg.speed.v < kMinSpeed || cfg.speed.v > kMaxSpeed)
        return fmt::format("LINK.speed: {} Mb/s out of range [1, {}]", cfg.speed.as_mbps(), kMaxSpeed / 1000000);
    if (cfg.wire_overhead.v > kMaxWireOverhead)
        return fmt::format("LINK.wire_overhead_bytes: {} out of range [0, {}]", cfg.wire_overhead.v,
                           kMaxWireOverhead);
    std::string e = delay_error("propagation_delay_ns", cfg.propagation_delay);
    for (std::size_t i = 0; i < cfg.paths.size() && e.empty(); ++i)
        e = delay_error(fmt::format("paths_ns[{}]", i), cfg.paths[i]);
    if (e.empty()) e = delay_error("reorder_delay_ns", cfg.reorder_delay);
    if (e.empty()) e = delay_error("jitter_ns", cfg.jitter);
    if (e.empty()) e = rate_error("loss_rate", cfg.loss_rate);
    if (e.empty()) e = rate_error("corrupt_rate", cfg.corrupt_rate);
    if (e.empty()) e = rate_error("reorder_rate", cfg.reorder_rate);
    if (e.empty()) e = rate_error("duplicate_rate", cfg.duplicate_rate);
    for (std::size_t i = 0; i < cfg.up_down.size() && e.empty(); ++i)
        if (cfg.up_down[i].first < Nanos{0})
            e = fmt::format("LINK.down_up[{}].at_ns: {} must be >= 0", i, cfg.up_down[i].first.v);
    if (e.empty() && cfg.storm && cfg.storm->period <= Nanos{0})
        e = fmt::format("LINK.pfc_storm.period_ns: {} must be > 0", cfg.storm->period.v);
    return e;
}

Model::Model(Config cfg) : cfg_(std::move(cfg)) {
    std::stable_sort(cfg_.up_down.begin(), cfg_.up_down.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (cfg_.storm && cfg_.storm->period > Nanos{0}) next_storm_ = cfg_.storm->start;
    if (cfg_.speed.v > 0 && (8 * kPsPerSecond) % cfg_.speed.v == 0) ps_per_byte_ = 8 * kPsPerSecond / cfg_.speed.v;
    wire_overhead_ = cfg_.wire_overhead.v;
    propagation_delay_ = cfg_.propagation_delay;
    plain_ = cfg_.paths.empty() && cfg_.up_down.empty() && cfg_.loss_rate == 0 && cfg_.corrupt_rate == 0 &&
             cfg_.reorder_rate == 0 && cfg_.jitter.v == 0 && cfg_.duplicate_rate == 0;
}

bool Model::up(Nanos now) const {
    bool state = true;
    for (const auto& [at, is_up] : cfg_.up_down) {
        if (at > now) break;
        state = is_up;
    }
    return state;
}

Delivery Model::transmit(Bytes frame_len, Nanos now, Rng& rng, uint32_t path_key) {
    offer(now);
    Delivery d;
    d.tx_start = Nanos{busy_ps_ / 1000};
    if (plain_) {
        serialise(frame_len);
        d.tx_end = busy_until();
        d.arrival = d.tx_end + propagation_delay_;
        return d;
    }
    const Nanos start = busy_until();
    if (!up(start)) {
        ++c_.lost_down;
        d.fate = Fate::LostLinkDown;
        d.tx_end = start;
        d.arrival = start;
        return d;
    }
    serialise(frame_len);
    d.tx_end = busy_until();

    const std::size_t path = cfg_.paths.size() > 1 ? path_key % cfg_.paths.size() : 0;
    d.arrival = d.tx_end + (cfg_.paths.empty() ? cfg_.propagation_delay : cfg_.paths[path]);
    if (rng.chance(cfg_.loss_rate)) {
        ++c_.lost_random;
        d.fate = Fate::LostRandom;
        return d;
    }
    if (rng.chance(cfg_.corrupt_rate)) {
        ++c_.corrupted;
        d.corruption = cfg_.corrupt_as;
        // The far MAC drops it: when it would have arrived does not matter.
        if (d.corruption == Corruption::BadFcs) return d;
    }
    Nanos late{0};
    if (rng.chance(cfg_.reorder_rate)) {
        ++c_.reordered;
        late = cfg_.reorder_delay;
    }
    if (cfg_.jitter.v > 0) {
        d.arrival += Nanos{static_cast<int64_t>(rng.below(static_cast<uint64_t>(cfg_.jitter.v) + 1))};
        if (!cfg_.jitter_reorders) d.arrival = std::max(d.arrival, last_arrival_[path]);
    }
    // A reordered frame is late on purpose: the frames behind it may pass it.
    last_arrival_[path] = d.arrival;
    d.arrival += late;
    if (rng.chance(cfg_.duplicate_rate)) {
        ++c_.duplicated;
        d.duplicate = true;
    }
    return d;
}

Nanos Model::next_event(Nanos now) const {
    Nanos t = Nanos::max();
    if (cfg_.storm && next_storm_ < cfg_.storm->stop) t = next_storm_;
    for (const auto& [at, is_up] : cfg_.up_down)
        if (at > now) {
            t = std::min(t, at);
            break;
        }
    return t;
}

std::optional<sw::PfcFrameDesc> Model::poll_storm(Nanos now) {
    if (!cfg_.storm || next_storm_ > now || next_storm_ >= cfg_.storm->stop) return std::nullopt;
    next_storm_ += cfg_.storm->period;
    ++c_.storm_frames;
    return cfg_.storm->frame;
}

}  // namespace rocemu::link
