// The virtual-time event queue: small plain events ordered by (time, seq).
// `seq` is assigned at push, so events due at the same nanosecond run in the
// order they were scheduled. That FIFO rule is what makes a run reproducible
// without "+1 ns" tie-breaks.
//
// Two tiers, because nearly every event in a fabric (a frame finishing
// serialisation, arriving after propagation) is due within microseconds:
//  - a wheel of kWheelSlots one-nanosecond slots covering
//    [base, base + kWheelSlots), each slot a FIFO linked through a node pool,
//    with a two-level bitmap to find the next busy slot: O(1) push and pop;
//  - a binary heap for everything later, whose events move into the wheel,
//    in (time, seq) order, as soon as the window reaches them. A direct push
//    into a slot can only happen after that move, so every slot stays in seq
//    order.
// base is the time of the last popped event; pushes must not be earlier.
// Storage grows to the peak backlog and is then reused: no allocation in
// steady state.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/units.hpp"

namespace rocemu::sim {

enum class EventKind : uint8_t {
    Timer,      // target: node; arg: timer generation
    TxDone,     // target: link; the frame being serialised has left the transmitter
    Deliver,    // target: link; arg: frame handle | link epoch << 32
    LinkState,  // target: link; arg: 1 = up, 0 = down
};

struct Event {
    Nanos time;
    uint64_t seq = 0;
    uint64_t arg = 0;
    uint32_t target = 0;
    EventKind kind = EventKind::Timer;
};

class EventQueue {
public:
    static constexpr uint32_t kWheelSlots = 8192;

    // The empty slots are filled here, not by default member initialisers:
    // GCC unrolled an initialiser of 2 x 8192 words at every place a queue
    // is constructed (a test file of a few queues took 3 minutes to build).
    EventQueue() {
        head_.fill(kNil);
        tail_.fill(kNil);
    }

    void reserve(std::size_t n) {
        nodes_.reserve(n);
        far_.reserve(n);
    }

    // Precondition: time >= the time of the last popped event.
    void push(Nanos time, EventKind kind, uint32_t target, uint64_t arg) {
        const Event e{time, next_seq_++, arg, target, kind};
        if (time.v - base_ < static_cast<int64_t>(kWheelSlots))
            wheel_append(e);
        else
            heap_push(e);
    }

    bool empty() const { return wheel_count_ == 0 && far_.empty(); }
    std::size_t size() const { return wheel_count_ + far_.size(); }
    // Events the storage holds without growing.
    std::size_t capacity() const { return nodes_.capacity() + far_.capacity(); }
    // Events pushed so far; also the seq the next push gets.
    uint64_t pushed() const { return next_seq_; }

    // Precondition: !empty().
    Event top() const {
        if (wheel_count_ == 0) return far_.front();
        return nodes_[head_[next_slot()]].event();
    }

    // top().time without unpacking the rest. Precondition: !empty().
    Nanos top_time() const {
        if (wheel_count_ == 0) return far_.front().time;
        return Nanos{nodes_[head_[next_slot()]].time};
    }

    // The event after top() when it is in top()'s slot or at most 127 slots
    // later (into `out`), else false: a cheap look two events ahead, for
    // prefetching only.
    bool peek_second(Event& out) const {
        if (wheel_count_ < 2) return false;
        const uint32_t s = next_slot();
        const uint32_t after = nodes_[head_[s]].next;
        if (after != kNil) {
            out = nodes_[after].event();
            return true;
        }
        const uint32_t b = static_cast<uint32_t>(base_) & kMask;
        const uint32_t w = s >> 6;
        uint64_t m = (s & 63) == 63 ? 0 : bits_[w] & (~uint64_t{0} << ((s & 63) + 1));
        uint32_t word = w;
        if (m == 0) {
            word = (w + 1) % kWords;
            m = bits_[word];
        }
        if (m == 0) return false;
        const uint32_t c = (word << 6) | static_cast<uint32_t>(std::countr_zero(m));
        // Past base's slot the wheel wraps round to later times.
        if (((c - b) & kMask) <= ((s - b) & kMask)) return false;
        out = nodes_[head_[c]].event();
        return true;
    }

    // Precondition: !empty().
    Event pop() {
        if (wheel_count_ == 0) advance_to(far_.front().time.v);
        const uint32_t slot = next_slot();
        const uint32_t idx = head_[slot];
        const Event out = nodes_[idx].event();
        head_[slot] = nodes_[idx].next;
        if (head_[slot] == kNil) {
            tail_[slot] = kNil;
            clear_bit(slot);
        }
        nodes_[idx].next = free_;
        free_ = idx;
        --wheel_count_;
        advance_to(out.time.v);
        return out;
    }

private:
    static constexpr uint32_t kNil = UINT32_MAX;
    static constexpr uint32_t kMask = kWheelSlots - 1;
    static constexpr uint32_t kWords = kWheelSlots / 64;
    static constexpr uint32_t kSummaryWords = (kWords + 63) / 64;

    // A wheel event in 32 bytes, aligned, so it never straddles two cache
    // lines (an Event plus its link took 40: half of them straddled, and a
    // push writes the old tail's link while a pop reads the head, both
    // usually long out of the cache in a large fabric). The kind rides in
    // the top byte of seq, which 2^56 pushes never reach.
    struct alignas(32) Node {
        int64_t time = 0;
        uint64_t seq_kind = 0;  // seq << 8 | kind
        uint64_t arg = 0;
        uint32_t target = 0;
        uint32_t next = kNil;

        Node() = default;
        Node(const Event& e, uint32_t n)
            : time(e.time.v),
              seq_kind(e.seq << 8 | static_cast<uint8_t>(e.kind)),
              arg(e.arg),
              target(e.target),
              next(n) {}
        Event event() const {
            return Event{Nanos{time}, seq_kind >> 8, arg, target, static_cast<EventKind>(seq_kind & 0xFF)};
        }
    };
    static_assert(sizeof(Node) == 32);

    static bool before(const Event& a, const Event& b) {
        return a.time < b.time || (a.time == b.time && a.seq < b.seq);
    }

    // Moves the window start to `t` and pulls in the far events it now covers.
    void advance_to(int64_t t) {
        base_ = t;
        while (!far_.empty() && far_.front().time.v - base_ < static_cast<int64_t>(kWheelSlots)) {
            wheel_append(far_.front());
            heap_pop();
        }
    }

    void wheel_append(const Event& e) {
        uint32_t idx;
        if (free_ != kNil) {
            idx = free_;
            free_ = nodes_[idx].next;
            nodes_[idx] = Node{e, kNil};
        } else {
            idx = static_cast<uint32_t>(nodes_.size());
            nodes_.push_back(Node{e, kNil});
        }
        const uint32_t slot = static_cast<uint32_t>(e.time.v) & kMask;
        if (tail_[slot] == kNil) {
            head_[slot] = idx;
            set_bit(slot);
        } else {
            nodes_[tail_[slot]].next = idx;
        }
        tail_[slot] = idx;
        ++wheel_count_;
    }

    void set_bit(uint32_t slot) {
        const uint32_t w = slot >> 6;
        bits_[w] |= uint64_t{1} << (slot & 63);
        summary_[w >> 6] |= uint64_t{1} << (w & 63);
    }

    void clear_bit(uint32_t slot) {
        const uint32_t w = slot >> 6;
        bits_[w] &= ~(uint64_t{1} << (slot & 63));
        if (bits_[w] == 0) summary_[w >> 6] &= ~(uint64_t{1} << (w & 63));
    }

    // The busy slot that comes first in time, scanning circularly from
    // base's slot. Precondition: wheel_count_ > 0.
    uint32_t next_slot() const {
        const uint32_t s = static_cast<uint32_t>(base_) & kMask;
        const uint32_t w = s >> 6;
        const uint64_t here = bits_[w] & (~uint64_t{0} << (s & 63));
        if (here != 0) return (w << 6) | static_cast<uint32_t>(std::countr_zero(here));
        const uint32_t word = next_word_after(w);
        return (word << 6) | static_cast<uint32_t>(std::countr_zero(bits_[word]));
    }

    // The first non-empty bitmap word after `w`, wrapping round. Word `w`
    // itself can only come back with slots below base's, that is the latest
    // times, which is where the wrap puts them.
    uint32_t next_word_after(uint32_t w) const {
        for (uint32_t i = w + 1; i < kWords;) {
            const uint32_t sw = i >> 6;
            const uint64_t m = summary_[sw] & (~uint64_t{0} << (i & 63));
            if (m != 0) return (sw << 6) | static_cast<uint32_t>(std::countr_zero(m));
            i = (sw + 1) << 6;
        }
        for (uint32_t sw = 0;; ++sw)
            if (summary_[sw] != 0) return (sw << 6) | static_cast<uint32_t>(std::countr_zero(summary_[sw]));
    }

    void heap_push(const Event& e) {
        far_.push_back(e);
        std::size_t i = far_.size() - 1;
        while (i > 0) {
            const std::size_t parent = (i - 1) / 2;
            if (!before(e, far_[parent])) break;
            far_[i] = far_[parent];
            i = parent;
        }
        far_[i] = e;
    }

    void heap_pop() {
        const Event last = far_.back();
        far_.pop_back();
        const std::size_t n = far_.size();
        if (n == 0) return;
        std::size_t i = 0;
        for (;;) {
            std::size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && before(far_[child + 1], far_[child])) ++child;
            if (!before(far_[child], last)) break;
            far_[i] = far_[child];
            i = child;
        }
        far_[i] = last;
    }

    int64_t base_ = 0;
    uint64_t next_seq_ = 0;
    std::size_t wheel_count_ = 0;
    std::vector<Node> nodes_;
    uint32_t free_ = kNil;
    std::array<uint32_t, kWheelSlots> head_;
    std::array<uint32_t, kWheelSlots> tail_;
    std::array<uint64_t, kWords> bits_{};
    std::array<uint64_t, kSummaryWords> summary_{};
    std::vector<Event> far_;  // binary min-heap on (time, seq)
};

}  // namespace rocemu::sim
