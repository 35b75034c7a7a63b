// One direction of a cable in virtual time: a transmit FIFO, a transmitter
// that serialises at the link rate, and a wire with propagation delay and
// fault injection (loss, duplication, corruption, jitter, K paths with
// different delays, down/up).
//
// Serialisation is exact: the transmitter's busy-until time is kept in
// picoseconds plus a remainder in 1/rate picoseconds, so back-to-back frames
// at any rate never drift from bits/rate however long the run. Events fire
// on the first whole nanosecond at or after the exact time.
//
// The link does not call nodes itself: the Simulator dispatches its events
// and hands delivered frames to the receiving node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/fixed_vec.hpp"
#include "common/rng.hpp"
#include "common/units.hpp"
#include "sim/event_queue.hpp"
#include "sim/frame_pool.hpp"

namespace rocemu::pcap {
class Writer;
}

namespace rocemu::sim {

using NodeId = uint32_t;
using PortId = uint16_t;
using LinkId = uint32_t;

inline constexpr std::size_t kMaxPaths = 16;

enum class CorruptMode : uint8_t {
    Icrc,  // flip one ICRC-covered byte of a RoCE frame; the receiver's ICRC check fails
    Fcs,   // the frame fails its Ethernet FCS and is dropped at the receiver
};

struct LinkConfig {
    BitsPerSec rate = BitsPerSec::gbps(100);
    Nanos propagation{0};
    // Bytes that may wait behind the frame being serialised.
    Bytes queue_limit{UINT64_MAX};
    double loss = 0.0;       // per frame, after serialisation
    double duplicate = 0.0;  // per delivered frame: a copy arrives right after it
    double corrupt = 0.0;    // per frame
    CorruptMode corrupt_mode = CorruptMode::Icrc;
    // Uniform extra delay in [0, jitter] per frame. Unless jitter_reorders,
    // a frame never arrives before an earlier frame of the same path.
    Nanos jitter{0};
    bool jitter_reorders = false;
    // K-path spraying: when non-empty, a RoCE frame takes path
    // (UDP source port % K) and that path's delay replaces `propagation`.
    // Other frames (PFC, ARP) take path 0. Paths may overtake each other.
    FixedVec<Nanos, kMaxPaths> paths;
};

// Empty if `cfg` is valid, else one message naming the key, the value and
// the allowed range.
std::string validate(const LinkConfig& cfg);

struct LinkEnd {
    NodeId node = 0;
    PortId port = 0;
};

// Why a frame did not arrive. Each has a counter.
enum class LinkDrop : uint8_t {
    QueueFull,  // the transmit queue was at queue_limit
    LinkDown,   // sent, queued or in flight while the link was down
    Loss,       // random loss on the wire
    BadFcs,     // corrupted where no ICRC can carry it (FCS mode, or not RoCE)
    kCount,
};
const char* to_string(LinkDrop d);

struct LinkCounters {
    uint64_t tx_frames = 0;  // frames that started serialisation
    uint64_t tx_bytes = 0;
    uint64_t delivered_frames = 0;  // handed to the receiving node, duplicates included
    uint64_t delivered_bytes = 0;
    uint64_t duplicated = 0;  // extra copies created
    uint64_t corrupted = 0;   // delivered with a bad ICRC
    uint64_t drops[static_cast<std::size_t>(LinkDrop::kCount)] = {};

    uint64_t dropped(LinkDrop d) const { return drops[static_cast<std::size_t>(d)]; }
    bool operator==(const LinkCounters&) const = default;
};

class Link {
public:
    enum class Send : uint8_t { Started, Queued, Dropped };

    Link(LinkId id, LinkEnd src, LinkEnd dst, const LinkConfig& cfg, uint64_t seed);

    // Takes ownership of `h`. Starts serialising it if the transmitter is
    // free, else queues it; a dropped frame goes back to the pool.
    Send send(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool);
    // A TxDone event. True if the transmitter is now idle with nothing queued.
    bool on_tx_done(Nanos now, EventQueue& q, FramePool& pool);
    // A Deliver event. The frame for the receiver, or invalid if it was dropped.
    FrameHandle on_deliver(uint64_t arg, Nanos now, FramePool& pool);
    // Going down drops the queue and everything still on the wire. False if
    // the link was already in that state.
    bool set_up(bool up, FramePool& pool);

    // Frames entering the wire (stamped when serialisation starts) and
    // frames leaving it (stamped on arrival) are written to these, if set.
    // Several links may share one writer.
    void set_taps(pcap::Writer* tx, pcap::Writer* rx) {
        tap_tx_ = tx;
        tap_rx_ = rx;
    }

    LinkId id() const { return id_; }
    LinkEnd src() const { return src_; }
    LinkEnd dst() const { return dst_; }
    const LinkConfig& config() const { return cfg_; }
    const LinkCounters& counters() const { return counters_; }
    bool up() const { return up_; }
    // Nothing serialising and nothing queued.
    bool idle() const { return !transmitting_ && queued_frames_ == 0; }
    Bytes queued_bytes() const { return queued_bytes_; }
    uint32_t queued_frames() const { return queued_frames_; }

private:
    void start(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool);
    Nanos busy_until_ceil() const;
    std::size_t pick_path(std::span<const uint8_t> frame) const;
    // False if the frame must be dropped as FCS-bad.
    bool corrupt(FrameHandle h, FramePool& pool);
    void drop(LinkDrop why, FrameHandle h, FramePool& pool);
    void ring_push(FrameHandle h);
    FrameHandle ring_pop();

    // Per-frame state first, so a frame touches as few cache lines as it can.
    LinkId id_;
    LinkEnd src_, dst_;
    bool up_ = true;
    bool transmitting_ = false;
    uint32_t epoch_ = 0;  // bumped when the link goes down, voiding frames in flight
    // The transmitter is busy until busy_ps_ + busy_frac_ / rate picoseconds.
    int64_t busy_ps_ = 0;
    uint64_t busy_frac_ = 0;
    uint32_t ring_head_ = 0;
    uint32_t queued_frames_ = 0;
    Bytes queued_bytes_{0};
    std::vector<FrameHandle> ring_;  // power-of-two sized FIFO
    pcap::Writer* tap_tx_ = nullptr;
    pcap::Writer* tap_rx_ = nullptr;
    Rng rng_;
    LinkConfig cfg_;
    LinkCounters counters_;
    FixedVec<Nanos, kMaxPaths> last_arrival_;
};

}  // namespace rocemu::sim
