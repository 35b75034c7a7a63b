// The clock of a live fabric process: it follows the TSC but advances at
// most `max_step` per turn. On a shared machine a process is descheduled for
// milliseconds at a time; with the real clock its switches and MACs would
// then release a gap's worth of frames at once, after an XOFF that should
// have stopped them, and overrun the headroom. With this clock a gap slows
// the fabric down instead, and the clock counts the real time it left out.
#pragma once

#include <algorithm>

#include "dataplane/dpdk/clock.hpp"
#include "fabric/topology.hpp"

namespace rocemu::fabric::live {

class FabricClock {
public:
    // Needs the EAL (the TSC rate).
    explicit FabricClock(Nanos max_step) : max_step_(max_step), real_last_(tsc_.now()) {}

    // Eight NIC-MTU frames on the fastest link of `t`: well inside the
    // headroom that absorbs what follows an XOFF.
    static Nanos max_step_for(const Topology& t) {
        BitsPerSec fastest{1};
        for (const LinkSpec& l : t.links) fastest = std::max(fastest, l.cls.speed);
        return fastest.serialise(Bytes{8u * (t.cfg.nic.mtu + 38u)});
    }

    // One turn: reads the TSC and returns the fabric time.
    Nanos advance() {
        const Nanos real = tsc_.now();
        last_dt_ = real - real_last_;
        real_last_ = real;
        if (last_dt_ > max_step_) {
            ++held_back_turns_;
            held_back_ += last_dt_ - max_step_;
        }
        now_ += std::min(last_dt_, max_step_);
        return now_;
    }
    Nanos now() const { return now_; }
    Nanos real() const { return real_last_; }      // the TSC at the last turn
    Nanos last_dt() const { return last_dt_; }     // real time between the last two turns
    uint64_t held_back_turns() const { return held_back_turns_; }
    Nanos held_back() const { return held_back_; }

private:
    dpdk::TscClock tsc_ = dpdk::TscClock::starting_now();
    Nanos max_step_;
    Nanos now_{};
    Nanos real_last_;
    Nanos last_dt_{};
    uint64_t held_back_turns_ = 0;
    Nanos held_back_{};
};

}  // namespace rocemu::fabric::live
