// WRED/ECN on one queue: the RED ramp on the instantaneous queue length.
// No mark below Kmin, probability rising linearly to Pmax at Kmax, always
// above Kmax. ECT packets are marked when ECN is on; other packets are
// dropped only when WRED (green) is enabled, else passed.
#pragma once

#include "common/rng.hpp"
#include "switch/config.hpp"

namespace rocemu::sw {

inline double red_probability(const WredProfile& w, Bytes qlen) {
    if (qlen <= w.green_min_threshold) return 0.0;
    if (qlen > w.green_max_threshold) return 1.0;
    const double span = static_cast<double>(w.green_max_threshold.v - w.green_min_threshold.v);
    return static_cast<double>(w.green_drop_probability) / 100.0 *
           static_cast<double>(qlen.v - w.green_min_threshold.v) / span;
}

enum class RedVerdict : uint8_t { Pass, Mark, Drop };

inline RedVerdict red_decide(const WredProfile& w, Bytes qlen, uint8_t ecn, Rng& rng) {
    if (!w.active()) return RedVerdict::Pass;
    const double p = red_probability(w, qlen);
    if (p <= 0.0 || (p < 1.0 && !(rng.uniform() < p))) return RedVerdict::Pass;
    if (ecn != kEcnNotEct && w.ecn == EcnMode::All) return RedVerdict::Mark;
    return w.wred_green_enable ? RedVerdict::Drop : RedVerdict::Pass;
}

}  // namespace rocemu::sw
