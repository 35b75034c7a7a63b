// One direction of a cable in virtual time: a transmit FIFO in front of the
// one link model (link/link.hpp), which times each frame (exact picosecond
// serialisation, propagation or K paths, jitter, reorder) and decides its
// faults (loss, corruption, duplication, scheduled down/up). This class adds
// what only virtual time needs: the queue of frame handles, the events, the
// bytes a corrupted frame carries, the manual down/up and pcap taps.
//
// The link does not call nodes itself: the Simulator dispatches its events
// and hands delivered frames to the receiving node.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "common/units.hpp"
#include "link/link.hpp"
#include "sim/event_queue.hpp"
#include "sim/frame_pool.hpp"

namespace rocemu::pcap {
class Writer;
}

namespace rocemu::sim {

using NodeId = uint32_t;
using PortId = uint16_t;
using LinkId = uint32_t;

using link::kMaxPaths;
using LinkConfig = link::Config;
using link::Corruption;

struct LinkEnd {
    NodeId node = 0;
    PortId port = 0;
};

// Why a frame did not arrive. Each has a counter.
enum class LinkDrop : uint8_t {
    QueueFull,  // the transmit queue was at queue_limit
    LinkDown,   // sent, queued or in flight while the link was down
    Loss,       // random loss on the wire
    BadFcs,     // corrupted where no ICRC can carry it (corrupt_as BadFcs, or not RoCE)
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

    // With `tx_ready`, every frame ends with a TxDone event, after which an
    // idle link tells its source node (on_tx_ready). Without, a TxDone is
    // queued only for a frame waiting behind another: a frame sent when
    // the wire is free and nothing waits costs its Deliver event alone.
    Link(LinkId id, LinkEnd src, LinkEnd dst, const LinkConfig& cfg, uint64_t seed, bool tx_ready = true);

    // Takes ownership of `h`. Starts serialising it if the transmitter is
    // free, else queues it; a dropped frame goes back to the pool.
    Send send(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool);
    // A TxDone event. True if the transmitter is now idle with nothing
    // queued and the link tells its source so.
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
        tapped_ = tx != nullptr || rx != nullptr;
    }

    // Starts loading what send, on_tx_done and on_deliver read into the
    // cache: the link's first line and the model's first.
    void prefetch() const {
        __builtin_prefetch(this);
        __builtin_prefetch(&model_);
    }

    LinkId id() const { return id_; }
    LinkEnd src() const { return src_; }
    LinkEnd dst() const { return dst_; }
    const LinkConfig& config() const { return model_.config(); }
    const LinkCounters& counters() const { return counters_; }
    bool up() const { return up_; }
    // Nothing serialising at `now` and nothing queued.
    bool idle(Nanos now) const { return !tx_event_ && queued_frames_ == 0 && model_.free_at(now); }
    Bytes queued_bytes() const { return queued_bytes_; }
    uint32_t queued_frames() const { return queued_frames_; }

private:
    void start(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool);
    uint32_t path_key(std::span<const uint8_t> frame) const;
    // False if the frame cannot carry a bad ICRC and must be dropped as
    // FCS-bad. A compact frame is made whole first: `h` may change.
    bool corrupt_icrc(FrameHandle& h, FramePool& pool);
    void drop(LinkDrop why, FrameHandle h, FramePool& pool);
    void ring_push(FrameHandle h);
    FrameHandle ring_pop();

    // What a frame reads on a link nothing queues on (every send, TxDone
    // and Deliver) is this object's first cache line: 32 bytes of state,
    // then the four counters every frame bumps (LinkCounters begins with
    // them); link::Model keeps its own per-frame state in its first line.
    // The transmit queue (used only while a frame waits behind another),
    // the taps (behind tapped_) and the fault counters lie past them.
    LinkId id_;
    LinkEnd src_, dst_;
    bool up_ = true;
    // A TxDone event is queued: the wire frees then, and a frame sent
    // before it waits for it. There is never more than one.
    bool tx_event_ = false;
    bool multipath_ : 1;    // the model has several paths: a frame's UDP source port picks one
    bool tapped_ : 1 = false;  // tap_tx_ or tap_rx_ is set
    bool tx_ready_ : 1;     // a TxDone for every frame, and on_tx_ready after the last
    uint32_t epoch_ = 0;  // bumped when the link goes down, voiding frames in flight
    uint32_t queued_frames_ = 0;
    LinkCounters counters_;  // at offset 32: its first four fields end the first line
    uint32_t ring_head_ = 0;
    Bytes queued_bytes_{0};
    std::vector<FrameHandle> ring_;  // power-of-two sized FIFO
    pcap::Writer* tap_tx_ = nullptr;
    pcap::Writer* tap_rx_ = nullptr;
    Rng rng_;
    link::Model model_;
};

}  // namespace rocemu::sim
