// The clock of a live fabric process: it follows the TSC but advances at
// most `max_step` per turn. On a shared machine a process is descheduled for
// milliseconds at a time; with the real clock its switches and MACs would
// then release a gap's worth of frames at once, after an XOFF that should
// have stopped them, and overrun the headroom. With this clock a gap slows
// the fabric down instead, and the clock counts the real time it left out.
//
// The processes of a split fabric on one machine also share it
// (SharedClock): a process's clock then stops within kLeadSteps steps of
// the slowest other one, so one process's gap slows the whole fabric down,
// not only itself. The clock counts the real time it waited so.
#pragma once

#include <algorithm>

#include "dataplane/dpdk/clock.hpp"
#include "fabric/live/shared_clock.hpp"
#include "fabric/topology.hpp"

namespace rocemu::fabric::live {

class FabricClock {
public:
    // Needs the EAL (the TSC rate).
    explicit FabricClock(Nanos max_step) : max_step_(max_step), real_last_(tsc_.now()) {}
    // Driven by advance(real) only: no TSC (tests).
    FabricClock(Nanos max_step, Nanos real_start)
        : tsc_(0, 1000000000u), max_step_(max_step), real_last_(real_start) {}

    // Eight NIC-MTU frames on the fastest link of `t`: well inside the
    // headroom that absorbs what follows an XOFF.
    static Nanos max_step_for(const Topology& t) {
        BitsPerSec fastest{1};
        for (const LinkSpec& l : t.links) fastest = std::max(fastest, l.cls.speed);
        return fastest.serialise(Bytes{8u * (t.cfg.nic.mtu + 38u)});
    }

    // How far, in steps, a process may run ahead of the slowest other
    // sharing its clock: each end of a sample the hosts node takes is then
    // off by at most that lead (1.1 ms at the 8:1 incast's 1:225;
    // fabric/README.md has what leads of 1 and 4 steps measured).
    static constexpr int64_t kLeadSteps = 2;
    // Others that waited for this clock are at most kLeadSteps ahead of it;
    // further than this, they did not know it (ClockRelay) and it jumps.
    static constexpr int64_t kJumpSteps = 2 * kLeadSteps;
    // How long a process waits for a shared clock's slowest member before
    // it looks whether that one is gone (died without leaving).
    static constexpr Nanos kLookForGoneAfter = Nanos::from_ms(500);

    // One turn: reads the TSC and returns the fabric time.
    Nanos advance() { return advance(tsc_.now()); }
    // One turn at real time `real`.
    Nanos advance(Nanos real) {
        last_dt_ = real - real_last_;
        real_last_ = real;
        if (last_dt_ > max_step_) {
            ++held_back_turns_;
            held_back_ += last_dt_ - max_step_;
        }
        Nanos want = now_ + std::min(last_dt_, max_step_);
        if (!shared_) {
            now_ = want;
            return now_;
        }
        if (want > cap_) {
            // Read the others only when past what they allowed last time.
            // Alone, it looks again next turn (somebody may join).
            const Nanos others = shared_->others_min();
            if (others != Nanos::max() && others > now_ + max_step_ * kJumpSteps) {
                // Further ahead than anyone who waits for this clock can
                // be: they ran without it (another machine, heard for the
                // first time). Go on from their time, as a joiner does.
                jumped_ += others - now_;
                now_ = others;
                want = others;
            }
            const Nanos cap = others == Nanos::max() ? want : others + max_step_ * kLeadSteps;
            if (cap > cap_) {
                cap_moved_ = real;
            } else if (real - cap_moved_ > kLookForGoneAfter) {
                shared_->drop_gone();  // read again next turn
                cap_moved_ = real;
            }
            cap_ = cap;
        }
        const Nanos got = std::max(now_, std::min(want, cap_));
        waited_ += want - got;
        now_ = got;
        shared_->publish(now_, real);
        return now_;
    }

    // Shares this clock through `s` from the next turn (SharedClock::join):
    // the clock may jump ahead to the others' time. nullptr stops sharing
    // (leaves).
    void share(SharedClock* s) {
        if (shared_) shared_->leave();
        shared_ = s;
        cap_ = Nanos{};
        cap_moved_ = real_last_;
        if (shared_) now_ = shared_->join(now_);
    }
    Nanos now() const { return now_; }
    Nanos max_step() const { return max_step_; }
    Nanos real() const { return real_last_; }      // the TSC at the last turn
    Nanos last_dt() const { return last_dt_; }     // real time between the last two turns
    uint64_t held_back_turns() const { return held_back_turns_; }
    Nanos held_back() const { return held_back_; }
    // Fabric time not counted because another process sharing the clock
    // was behind.
    Nanos waited() const { return waited_; }
    // Fabric time skipped to catch up with others that ran without this
    // clock (kJumpSteps).
    Nanos jumped() const { return jumped_; }

private:
    dpdk::TscClock tsc_ = dpdk::TscClock::starting_now();
    Nanos max_step_;
    Nanos now_{};
    Nanos real_last_;
    Nanos last_dt_{};
    uint64_t held_back_turns_ = 0;
    Nanos held_back_{};
    SharedClock* shared_ = nullptr;
    Nanos cap_{};        // the others' least time plus the lead, when last read
    Nanos cap_moved_{};  // real time the cap last rose
    Nanos waited_{};
    Nanos jumped_{};
};

// How often a node exchanges its machine's time with the other machines
// (ClockRelay): half a step, so what it hears is at most a step old plus the
// network's delay, within the lead of two steps on a LAN.
inline Nanos relay_every(Nanos max_step) { return std::max(max_step / 2, Nanos::from_us(10)); }

// Shares `clock` through `s` (null: not at all) for the guard's life.
class ClockSharing {
public:
    ClockSharing(FabricClock& clock, SharedClock* s) : clock_(clock) { clock_.share(s); }
    ~ClockSharing() { clock_.share(nullptr); }
    ClockSharing(const ClockSharing&) = delete;
    ClockSharing& operator=(const ClockSharing&) = delete;

private:
    FabricClock& clock_;
};

}  // namespace rocemu::fabric::live
