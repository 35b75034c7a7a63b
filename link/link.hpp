// One direction of a cable: its timing and its faults, as one pure model
// shared by the live soft-switch (switch/dpdk) and the virtual-time
// simulator (sim::Link), so a fault scenario behaves the same in both.
//
// The caller hands in each frame with `now` and an Rng&, and gets back when
// (and whether, and how damaged) it arrives. The model owns no frames, no
// queue and no clock: what to do with the bytes is the caller's business.
//
// Serialisation is exact: the wire's busy-until time is kept in picoseconds
// plus a remainder in 1/speed picoseconds, so back-to-back frames at any
// speed never drift from bits/speed however long the run. Reported times are
// the first whole nanosecond at or after the exact time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/fixed_vec.hpp"
#include "common/rng.hpp"
#include "common/units.hpp"
// PfcFrameDesc and kWireOverhead are 802.1Qbb / MAC vocabulary the switch
// core already defines; the header has no code to link against.
#include "switch/types.hpp"

namespace rocemu::link {

inline constexpr std::size_t kMaxPaths = 16;

enum class Corruption : uint8_t {
    None,
    BadFcs,   // the receiving MAC drops the frame
    BadIcrc,  // the frame arrives; a RoCE receiver's ICRC check fails
};

// A port that keeps pausing its peer: PFC frames every `period` from
// `start` until `stop`.
struct PfcStorm {
    Nanos start = Nanos::max();
    Nanos stop = Nanos::max();
    Nanos period{};
    sw::PfcFrameDesc frame{};
};

// Keys are the YAML keys parse_link_config() reads (with _ns / _bytes units).
struct Config {
    BitsPerSec speed = BitsPerSec::gbps(100);
    Nanos propagation_delay{0};
    // Bytes on the wire per frame beyond its length: preamble, SFD and IFG.
    Bytes wire_overhead = sw::kWireOverhead;
    // Bytes that may wait behind the frame being serialised. Only a caller
    // that queues (sim::Link) reads it; the live switch's MMU queues instead.
    Bytes queue_limit{UINT64_MAX};
    double loss_rate = 0.0;       // per frame
    double corrupt_rate = 0.0;    // per frame that was not lost
    Corruption corrupt_as = Corruption::BadFcs;
    double reorder_rate = 0.0;    // per frame: delivered reorder_delay late
    Nanos reorder_delay{0};
    // Uniform extra delay in [0, jitter] per frame. Unless jitter_reorders,
    // a frame never arrives before an earlier frame of the same path.
    Nanos jitter{0};
    bool jitter_reorders = false;
    double duplicate_rate = 0.0;  // per delivered frame: a copy arrives with it
    // K-path spraying: when non-empty, a frame takes path (path_key % K) and
    // that path's delay replaces propagation_delay. Paths may overtake.
    FixedVec<Nanos, kMaxPaths> paths;
    // (time, up) state changes; the link starts up. Any order.
    std::vector<std::pair<Nanos, bool>> up_down;
    std::optional<PfcStorm> storm;
};

// Empty if `cfg` is valid, else one message naming the key, the value and
// the allowed range, worded as parse_link_config() words it.
std::string validate(const Config& cfg);

enum class Fate : uint8_t { Delivered, LostLinkDown, LostRandom };

struct Delivery {
    Fate fate = Fate::Delivered;
    Corruption corruption = Corruption::None;
    bool duplicate = false;  // a second copy arrives at `arrival` too
    Nanos tx_start{};        // first bit on the wire (rounded down)
    Nanos tx_end{};          // last bit on the wire
    Nanos arrival{};         // last bit at the far end
};

struct Counters {
    uint64_t frames = 0;  // frames that took the wire
    uint64_t bytes = 0;
    uint64_t lost_down = 0;
    uint64_t lost_random = 0;
    uint64_t corrupted = 0;
    uint64_t reordered = 0;
    uint64_t duplicated = 0;
    uint64_t storm_frames = 0;
};

// Aligned so that the fields every frame touches (below) share one cache
// line: a large fabric has thousands of links, each touched cold.
class alignas(64) Model {
public:
    // `cfg` must pass validate().
    explicit Model(Config cfg);

    // A frame offered at `now`. It starts when the wire is free, takes its
    // serialisation time (length plus wire_overhead) and its path's delay.
    // A frame offered while the link is down occupies no wire and is lost.
    // `path_key` picks the path when there are several (the UDP source port
    // of a RoCE frame, else 0).
    //
    // The random draws come in a fixed order (loss, corruption, reorder,
    // jitter, duplication), each only when its rate is non-zero, so the fate
    // sequence depends only on the Rng's seed and the frames offered.
    Delivery transmit(Bytes frame_len, Nanos now, Rng& rng, uint32_t path_key = 0);

    // True when transmit() only times a frame (no paths, down/up schedule,
    // loss, corruption, reorder, jitter or duplication): every frame is
    // Delivered whole, draws nothing and arrives propagation_delay() after
    // its tx_end.
    bool plain() const { return plain_; }
    Nanos propagation_delay() const { return propagation_delay_; }
    // A burst on a plain() link in one call: frame i offered at at(frames[i])
    // with length len(frames[i]), in order. The wire and the counters end as
    // frames.size() transmit() calls leave them, to the picosecond; a caller
    // that needs a frame's times beyond "start + propagation_delay()" calls
    // transmit() instead.
    template <class T, class Len, class At>
    void transmit_plain(std::span<const T> frames, Len len, At at);

    bool up(Nanos now) const;
    // When the wire is next free.
    Nanos busy_until() const { return Nanos{(busy_ps_ + (busy_frac_ != 0 ? 1 : 0) + 999) / 1000}; }
    // busy_until() <= now, without its divide.
    bool free_at(Nanos now) const { return busy_ps_ + (busy_frac_ != 0 ? 1 : 0) <= now.v * 1000; }
    // The next storm frame or up/down change after the ones already seen.
    Nanos next_event(Nanos now) const;
    // The storm frame due at or before `now`, if any; call until nullopt.
    std::optional<sw::PfcFrameDesc> poll_storm(Nanos now);

    const Config& config() const { return cfg_; }
    const Counters& counters() const { return c_; }

private:
    static constexpr uint64_t kPsPerSecond = 1000000000000ull;

    // A frame offered in the nanosecond the previous one ended follows it
    // back to back from its exact end, so a sender that refills the wire as
    // soon as it is free loses nothing to rounding.
    void offer(Nanos now) {
        // busy_until() < now without busy_until()'s divide (times are never negative).
        if (busy_ps_ + (busy_frac_ != 0 ? 1 : 0) + 1000 <= now.v * 1000) {
            busy_ps_ = now.v * 1000;
            busy_frac_ = 0;
        }
    }
    // Advances the wire by one frame of `frame_len` bytes; counts nothing.
    // Inline: transmit_plain runs it once a frame.
    void occupy(Bytes frame_len) {
        if (ps_per_byte_) {
            busy_ps_ += static_cast<int64_t>((frame_len.v + wire_overhead_) * ps_per_byte_);
        } else {
            const uint64_t total = busy_frac_ + (frame_len.v + wire_overhead_) * 8 * kPsPerSecond;
            busy_ps_ += static_cast<int64_t>(total / cfg_.speed.v);
            busy_frac_ = total % cfg_.speed.v;
        }
    }
    // occupy() and count the frame.
    void serialise(Bytes frame_len) {
        occupy(frame_len);
        ++c_.frames;
        c_.bytes += frame_len.v;
    }

    // Every frame reads and writes these and the first two counters, which
    // share the first cache line; a frame on a plain link reads nothing else.
    // The wire is busy until busy_ps_ + busy_frac_ / speed picoseconds.
    int64_t busy_ps_ = 0;
    uint64_t busy_frac_ = 0;
    // 8 s / speed in ps when that is whole (every Ethernet speed): a frame
    // then serialises with a multiply, busy_frac_ stays 0, and the frame
    // path has no 64-bit divide. 0 otherwise.
    uint64_t ps_per_byte_ = 0;
    uint64_t wire_overhead_ = 0;  // cfg_.wire_overhead
    Nanos propagation_delay_{};   // cfg_.propagation_delay
    // No paths, down/up schedule, loss, corruption, reorder, jitter or
    // duplication: a frame is only timed, and draws nothing.
    bool plain_ = false;
    Counters c_{};
    Config cfg_;
    Nanos next_storm_ = Nanos::max();
    std::array<Nanos, kMaxPaths> last_arrival_{};
};

template <class T, class Len, class At>
void Model::transmit_plain(std::span<const T> frames, Len len, At at) {
    uint64_t bytes = 0;
    for (const T& f : frames) {
        const Bytes l = len(f);
        offer(at(f));
        occupy(l);
        bytes += l.v;
    }
    c_.frames += frames.size();
    c_.bytes += bytes;
}

}  // namespace rocemu::link
