// One direction of a cable, with fault injection. Pure: the caller hands in
// each frame with `now` and an Rng&, and gets back when (and whether, and
// how damaged) it arrives. The live runtime and the virtual-time fabric use
// the same object, so a fault scenario behaves the same in both.
#pragma once

#include <optional>
#include <vector>

#include "common/rng.hpp"
#include "switch/types.hpp"

namespace rocemu::sw {

enum class Corruption : uint8_t { None, BadFcs, BadIcrc };

// A port that keeps pausing its peer: PFC frames every `period` from
// `start` until `stop`.
struct PfcStorm {
    Nanos start = Nanos::max();
    Nanos stop = Nanos::max();
    Nanos period{};
    PfcFrameDesc frame{};
};

struct LinkConfig {
    BitsPerSec speed = BitsPerSec::gbps(100);
    Nanos propagation_delay{0};
    double loss_rate = 0.0;     // per frame
    double corrupt_rate = 0.0;  // per frame
    Corruption corrupt_as = Corruption::BadFcs;
    double reorder_rate = 0.0;  // per frame: delivered reorder_delay late
    Nanos reorder_delay{0};
    // (time, up) state changes in time order; the link starts up.
    std::vector<std::pair<Nanos, bool>> up_down;
    std::optional<PfcStorm> storm;
};

enum class LinkFate : uint8_t { Delivered, LostLinkDown, LostRandom };

struct LinkDelivery {
    LinkFate fate = LinkFate::Delivered;
    Corruption corruption = Corruption::None;
    Nanos tx_end{};   // last bit on the wire
    Nanos arrival{};  // last bit at the far end
};

struct LinkCounters {
    uint64_t frames = 0;
    uint64_t bytes = 0;
    uint64_t lost_down = 0;
    uint64_t lost_random = 0;
    uint64_t corrupted = 0;
    uint64_t reordered = 0;
    uint64_t storm_frames = 0;
};

class Link {
public:
    explicit Link(LinkConfig cfg);

    // A frame offered at `now`. It starts when the wire is free, takes its
    // serialisation time (frame plus preamble and IFG) and the propagation
    // delay. A frame sent while the link is down occupies no wire and is lost.
    LinkDelivery transmit(Bytes frame_len, Nanos now, Rng& rng);

    bool up(Nanos now) const;
    Nanos busy_until() const { return busy_until_; }
    // The next storm frame or up/down change after the ones already seen.
    Nanos next_event(Nanos now) const;
    // The storm frame due at or before `now`, if any; call until nullopt.
    std::optional<PfcFrameDesc> poll_storm(Nanos now);

    const LinkConfig& config() const { return cfg_; }
    const LinkCounters& counters() const { return c_; }

private:
    LinkConfig cfg_;
    Nanos busy_until_{};
    Nanos next_storm_ = Nanos::max();
    LinkCounters c_{};
};

}  // namespace rocemu::sw
