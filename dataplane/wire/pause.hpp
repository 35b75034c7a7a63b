// The IEEE 802.1Qbb receiver: when each priority may transmit again. A PFC
// frame pauses each priority it enables for quanta x 512 bit times at the
// receiving port's speed; a time of 0 resumes at once. Used by every sender
// that honours PFC (the emulated NIC and the live switch), so they agree.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/units.hpp"

namespace rocemu::wire {

class PfcPauseState {
public:
    static constexpr int kPriorities = 8;

    // `F` is any PFC frame description with `class_enable` and `quanta[8]`
    // (wire::Pfc, or the switch core's PfcFrameDesc).
    template <typename F>
    void on_pfc(const F& f, Nanos now, BitsPerSec speed) {
        for (int p = 0; p < kPriorities; ++p) {
            if (!((f.class_enable >> p) & 1)) continue;
            const auto i = static_cast<size_t>(p);
            const uint16_t q = f.quanta[i];
            if (q == 0) {
                until_[i] = now;
                ++xon_[i];
            } else {
                until_[i] = now + speed.serialise(Bytes{uint64_t{q} * 512 / 8});
                ++xoff_[i];
            }
        }
    }

    bool paused(int prio, Nanos now) const { return until_[static_cast<size_t>(prio)] > now; }
    Nanos until(int prio) const { return until_[static_cast<size_t>(prio)]; }
    uint64_t xoff_frames(int prio) const { return xoff_[static_cast<size_t>(prio)]; }
    uint64_t xon_frames(int prio) const { return xon_[static_cast<size_t>(prio)]; }

private:
    std::array<Nanos, kPriorities> until_{};
    std::array<uint64_t, kPriorities> xoff_{};
    std::array<uint64_t, kPriorities> xon_{};
};

}  // namespace rocemu::wire
