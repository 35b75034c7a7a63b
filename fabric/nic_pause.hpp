// What a host port does with received PFC frames, shared by the virtual-time
// NIC models (GenNic, EngineNic) and the live NIC's MAC (live::NicWire).
#pragma once

#include <cstdint>

#include "common/units.hpp"
#include "dataplane/wire/pause.hpp"

namespace rocemu::fabric {

// The 802.1Qbb pause state of one data priority (wire::PfcPauseState, as the
// switch keeps it) plus the time that priority has been held back.
class NicPause {
public:
    NicPause(uint8_t prio, BitsPerSec speed) : prio_(prio), speed_(speed) {}

    // True if the frame names the data priority.
    template <typename F>
    bool on_pfc(const F& f, Nanos now) {
        const Nanos before = state_.until(prio_);
        state_.on_pfc(f, now, speed_);
        if (!((f.class_enable >> prio_) & 1)) return false;
        // A pause replaces the one in force: count only its new span.
        if (before > now) total_ -= before - now;
        if (state_.until(prio_) > now) total_ += state_.until(prio_) - now;
        return true;
    }
    bool paused(Nanos now) const { return state_.paused(prio_, now); }
    Nanos until() const { return state_.until(prio_); }
    // Time the data priority was held back, up to `now`.
    Nanos paused_time(Nanos now) const { return total_ - (until() > now ? until() - now : Nanos{0}); }

private:
    // prio_ first: paused() reads it and until_[prio_], which then share a line.
    uint8_t prio_;
    BitsPerSec speed_;
    Nanos total_{};
    wire::PfcPauseState state_;
};

}  // namespace rocemu::fabric
