// The MAC and cable of a live NIC: what sits between the verbs device's
// port and its leaf port. The verbs NIC hands frames to its port as fast as
// its windows allow, so on a bare ring the switch would see a whole window
// at once and no headroom could absorb what follows an XOFF. NicWire does
// what the NIC's MAC does: it serialises the NIC's frames at the link speed
// (frame + 20 B preamble and IFG), adds the propagation delay, and holds
// data (not PFC frames) while the switch pauses the NIC's priority. Frames
// from the switch pass straight through; the PFC frames among them are
// read on the way to set the pause.
//
//   NIC port  --tx-->  from_nic  [NicWire]  to_switch  --rx-->  switch port
//   NIC port  <--rx--  to_nic    [NicWire]  from_switch <--tx-- switch port
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <vector>

#include "common/units.hpp"
#include "fabric/nic_pause.hpp"

namespace rocemu::fabric::live {

struct NicWireCounters {
    uint64_t to_switch_frames = 0;
    uint64_t to_nic_frames = 0;
    uint64_t pfc_seen = 0;          // PFC frames from the switch
    uint64_t held_turns = 0;        // turns a frame waited for a pause to end
    uint64_t ring_full = 0;         // turns a frame waited for room in a ring (never dropped)
};

class NicWire {
public:
    static constexpr uint16_t kBurst = 32;
    static constexpr size_t kDelayCap = 8192;

    NicWire(rte_ring* from_nic, rte_ring* to_switch, rte_ring* from_switch, rte_ring* to_nic, BitsPerSec speed,
            Nanos propagation, int pfc_priority);
    ~NicWire();
    NicWire(const NicWire&) = delete;
    NicWire& operator=(const NicWire&) = delete;

    // One turn at `now`: frames from the switch to the NIC, then the NIC's
    // frames onto the wire while it is free and not paused, then arrivals.
    void poll(Nanos now);
    const NicWireCounters& counters() const { return c_; }
    bool paused(Nanos now) const { return pause_.paused(now); }
    // Time the NIC's data priority was held back by PFC, up to `now`.
    Nanos paused_time(Nanos now) const { return pause_.paused_time(now); }
    // Holds no frame of the NIC (none waiting for the wire, none on it).
    bool idle() const { return !head_ && flight_head_ == flight_.size(); }

private:
    struct InFlight {
        Nanos arrival;
        rte_mbuf* m;
    };

    void from_switch_to_nic(Nanos now);
    void serialise(Nanos now);
    void arrive(Nanos now);

    rte_ring* from_nic_;
    rte_ring* to_switch_;
    rte_ring* from_switch_;
    rte_ring* to_nic_;
    BitsPerSec speed_;
    Nanos propagation_;
    NicPause pause_;
    Nanos free_at_{};
    rte_mbuf* head_ = nullptr;  // the NIC's next frame, taken off its ring at head_seen_
    Nanos head_seen_{};
    std::vector<InFlight> flight_;  // FIFO: arrivals are in order (one speed, one delay)
    size_t flight_head_ = 0;
    NicWireCounters c_;
};

}  // namespace rocemu::fabric::live
