#include "switch/link.hpp"

#include <algorithm>

namespace rocemu::sw {

Link::Link(LinkConfig cfg) : cfg_(std::move(cfg)) {
    std::stable_sort(cfg_.up_down.begin(), cfg_.up_down.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (cfg_.storm && cfg_.storm->period > Nanos{0}) next_storm_ = cfg_.storm->start;
}

bool Link::up(Nanos now) const {
    bool state = true;
    for (const auto& [at, is_up] : cfg_.up_down) {
        if (at > now) break;
        state = is_up;
    }
    return state;
}

LinkDelivery Link::transmit(Bytes frame_len, Nanos now, Rng& rng) {
    LinkDelivery d;
    const Nanos start = std::max(now, busy_until_);
    if (!up(start)) {
        ++c_.lost_down;
        d.fate = LinkFate::LostLinkDown;
        d.tx_end = start;
        d.arrival = start;
        return d;
    }
    d.tx_end = start + cfg_.speed.serialise(frame_len + kWireOverhead);
    busy_until_ = d.tx_end;
    d.arrival = d.tx_end + cfg_.propagation_delay;
    ++c_.frames;
    c_.bytes += frame_len.v;
    if (rng.chance(cfg_.loss_rate)) {
        ++c_.lost_random;
        d.fate = LinkFate::LostRandom;
        return d;
    }
    if (rng.chance(cfg_.corrupt_rate)) {
        ++c_.corrupted;
        d.corruption = cfg_.corrupt_as;
    }
    if (rng.chance(cfg_.reorder_rate)) {
        ++c_.reordered;
        d.arrival += cfg_.reorder_delay;
    }
    return d;
}

Nanos Link::next_event(Nanos now) const {
    Nanos t = Nanos::max();
    if (cfg_.storm && next_storm_ < cfg_.storm->stop) t = next_storm_;
    for (const auto& [at, is_up] : cfg_.up_down)
        if (at > now) {
            t = std::min(t, at);
            break;
        }
    return t;
}

std::optional<PfcFrameDesc> Link::poll_storm(Nanos now) {
    if (!cfg_.storm || next_storm_ > now || next_storm_ >= cfg_.storm->stop) return std::nullopt;
    next_storm_ += cfg_.storm->period;
    ++c_.storm_frames;
    return cfg_.storm->frame;
}

}  // namespace rocemu::sw
