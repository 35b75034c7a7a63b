// The virtual-time event queue: small plain events ordered by (time, seq).
// `seq` is assigned at push, so events due at the same nanosecond run in the
// order they were scheduled. That FIFO rule is what makes a run reproducible
// without "+1 ns" tie-breaks. Events pushed with push_first() run before
// every push()ed event of their nanosecond (in their own push order): a
// switch port that becomes free at t is served before the frames arriving
// at t, so queue-depth decisions at t (ECN marks, adaptive routing) see the
// frames that left by t gone, however the events were scheduled.
//
// Internally an event's time is a key of two a nanosecond, 2t for
// push_first() and 2t + 1 for push(), so both rules are one (key, seq)
// order. Two tiers, because nearly every event in a fabric (a frame
// finishing serialisation, arriving after propagation) is due within
// microseconds:
//  - a wheel of kWheelSlots slots, one a key (half a nanosecond), covering
//    keys [base, base + kWheelSlots), each slot a FIFO of chunks of four
//    events from a chunk pool, with a two-level bitmap to find the next busy
//    slot: O(1) push and pop;
//  - a binary heap for everything later, whose events move into the wheel,
//    in (key, seq) order, as soon as the window reaches them. A direct push
//    into a slot can only happen after that move, so every slot stays in seq
//    order.
// base is the key of the last popped event; pushes must not be earlier.
// Storage grows to the peak backlog and is then reused: no allocation in
// steady state.
#pragma once

#include <algorithm>
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
    PortTimer,  // target: node; arg: port (Simulator::arm_port)
};
inline constexpr std::size_t kEventKinds = 5;
static_assert(static_cast<std::size_t>(EventKind::PortTimer) + 1 == kEventKinds, "PortTimer is the last kind");
const char* to_string(EventKind k);

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
    static constexpr int64_t kWheelSpanNs = kWheelSlots / 2;  // keys are half nanoseconds

    // The empty slots are filled here, not by default member initialisers:
    // GCC unrolled an initialiser of 2 x 8192 words at every place a queue
    // is constructed (a test file of a few queues took 3 minutes to build).
    EventQueue() {
        head_.fill(kNil);
        tail_.fill(kNil);
        tail_n_.fill(0);
    }

    // Precondition: time >= the time of the last popped event.
    void push(Nanos time, EventKind kind, uint32_t target, uint64_t arg) {
        insert(Event{Nanos{key(time) + 1}, next_seq_++, arg, target, kind});
    }
    // Runs before every push()ed event of the same time, after the
    // push_first()ed ones pushed before it. Precondition: time is later than
    // the last popped event's, or equal to it if that one was pushed first.
    void push_first(Nanos time, EventKind kind, uint32_t target, uint64_t arg) {
        insert(Event{Nanos{key(time)}, next_seq_++, arg, target, kind});
    }

    bool empty() const { return wheel_count_ == 0 && far_.empty(); }
    std::size_t size() const { return wheel_count_ + far_.size(); }
    // Events the storage holds without growing, however they spread over
    // the slots (a wheel chunk holds at least one).
    std::size_t capacity() const { return chunks_.capacity() + far_.capacity(); }
    // Events pushed so far; also the seq the next push gets.
    uint64_t pushed() const { return next_seq_; }

    // Precondition: !empty().
    Event top() const {
        if (wheel_count_ != 0) {
            const Chunk& k = chunks_[head_[next_slot()]];
            return k.ev[k.pos].event();
        }
        Event e = far_.front();
        e.time = Nanos{e.time.v >> 1};
        return e;
    }

    // A wheel event in 28 bytes, its time a key. The kind rides in the top
    // byte of seq, which 2^56 pushes never reach.
    struct __attribute__((packed, aligned(4))) Slotted {
        int64_t time;
        uint64_t seq_kind;  // seq << 8 | kind
        uint64_t arg;
        uint32_t target;

        static Slotted of(const Event& e) {
            return Slotted{e.time.v, e.seq << 8 | static_cast<uint8_t>(e.kind), e.arg, e.target};
        }
        EventKind kind() const { return static_cast<EventKind>(seq_kind & 0xFF); }
        // The event as pushed: its time in nanoseconds.
        Event event() const { return Event{Nanos{time >> 1}, seq_kind >> 8, arg, target, kind()}; }
    };
    static_assert(sizeof(Slotted) == 28);

    // What pop_due() knows, without a scan, of the events popped after it:
    // the next (n >= 1) and the one after (n == 2) while they are in the
    // next event's slot. A hint for prefetching, void after a push or pop.
    struct Ahead {
        const Slotted* ev[2];
        uint8_t n = 0;
    };

    // Pops the next event into `out` if one is due at or before `limit`,
    // and fills `ahead`; else false (and the queue is as it was).
    [[gnu::always_inline]] bool pop_due(Nanos limit, Event& out, Ahead& ahead) {
        if (wheel_count_ == 0) {
            if (far_.empty() || (far_.front().time.v >> 1) > limit.v) return false;
            advance_to(far_.front().time.v);
        }
        const uint32_t slot = next_slot();
        const uint32_t idx = head_[slot];
        Chunk& k = chunks_[idx];
        const int64_t at = k.ev[k.pos].time;
        if ((at >> 1) > limit.v) return false;
        out = k.ev[k.pos++].event();
        if (k.pos == 1 && k.next != kNil) {
            // The slot's next chunk, four events ahead.
            __builtin_prefetch(&chunks_[k.next]);
            __builtin_prefetch(reinterpret_cast<const char*>(&chunks_[k.next]) + 64);
        }
        if (k.pos == written(slot, idx)) {  // drained
            head_[slot] = k.next;
            if (k.next == kNil) {
                tail_[slot] = kNil;
                clear_bit(slot);
            }
            k.next = free_;
            free_ = idx;
        }
        --wheel_count_;
        advance_to(at);
        ahead.n = 0;
        if (wheel_count_ != 0) {
            const uint32_t s = next_slot();
            const Chunk& h = chunks_[head_[s]];
            ahead.ev[0] = &h.ev[h.pos];
            ahead.n = 1;
            if (h.pos + 1u < written(s, head_[s])) {
                ahead.ev[1] = &h.ev[h.pos + 1];
                ahead.n = 2;
            } else if (h.next != kNil) {
                ahead.ev[1] = &chunks_[h.next].ev[0];
                ahead.n = 2;
            }
        }
        return true;
    }

    // Precondition: !empty().
    Event pop() {
        Event out;
        Ahead ahead;
        pop_due(Nanos::max(), out, ahead);
        return out;
    }

private:
    static constexpr uint32_t kNil = UINT32_MAX;
    static constexpr uint32_t kMask = kWheelSlots - 1;
    static constexpr uint32_t kWords = kWheelSlots / 64;
    static constexpr uint32_t kSummaryWords = (kWords + 63) / 64;


    // A slot's events in push order, four to a chunk of two cache lines
    // (the header and two events, then two), chunks of a slot linked. In a
    // large fabric a slot holds several events, pushed at different times,
    // and by their turn long out of the cache: one event a node cost a miss
    // a pop (the next one) and another a push (the old tail's link); a chunk
    // costs one for four, and the pop prefetches a slot's next chunk.
    // How many events a chunk holds is not in the chunk: every chunk but a
    // slot's tail is full, and the tail's count is in tail_n_, beside
    // tail_, so that a push only writes to the chunk. A write that misses
    // waits in the store buffer; a read of the count stalled the push.
    static constexpr uint8_t kPerChunk = 4;
    struct alignas(64) Chunk {
        uint32_t next = kNil;  // the slot's next chunk; the free list's link
        uint8_t pos = 0;       // events popped
        Slotted ev[kPerChunk];
    };
    static_assert(sizeof(Chunk) == 128);

    // The key of time t's push_first() events; push()'s is one more. Times
    // past 2^62 ns (146 years) share the last key.
    static int64_t key(Nanos t) { return 2 * std::min(t.v, int64_t{1} << 62); }

    void insert(const Event& e) {
        if (e.time.v - base_ < static_cast<int64_t>(kWheelSlots))
            wheel_append(e);
        else
            heap_push(e);
    }

    static bool before(const Event& a, const Event& b) {
        return a.time < b.time || (a.time == b.time && a.seq < b.seq);
    }

    // Moves the window start to key `t` and pulls in the far events it now covers.
    void advance_to(int64_t t) {
        base_ = t;
        while (!far_.empty() && far_.front().time.v - base_ < static_cast<int64_t>(kWheelSlots)) {
            wheel_append(far_.front());
            heap_pop();
        }
    }

    uint32_t alloc_chunk() {
        if (free_ == kNil) {
            chunks_.emplace_back();
            return static_cast<uint32_t>(chunks_.size() - 1);
        }
        const uint32_t idx = free_;
        Chunk& k = chunks_[idx];
        free_ = k.next;
        k.next = kNil;
        k.pos = 0;
        return idx;
    }

    void wheel_append(const Event& e) {
        const uint32_t slot = static_cast<uint32_t>(e.time.v) & kMask;
        uint32_t t = tail_[slot];
        uint8_t& n = tail_n_[slot];
        if (t == kNil) {
            t = alloc_chunk();
            head_[slot] = t;
            tail_[slot] = t;
            n = 0;
            set_bit(slot);
        } else if (n == kPerChunk) {
            const uint32_t c = alloc_chunk();
            chunks_[t].next = c;
            tail_[slot] = c;
            t = c;
            n = 0;
        }
        chunks_[t].ev[n++] = Slotted::of(e);
        ++wheel_count_;
    }

    // Events written to chunk `idx` of `slot`.
    uint32_t written(uint32_t slot, uint32_t idx) const { return idx == tail_[slot] ? tail_n_[slot] : kPerChunk; }

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
    std::vector<Chunk> chunks_;
    uint32_t free_ = kNil;  // free chunks
    std::array<uint32_t, kWheelSlots> head_;
    std::array<uint32_t, kWheelSlots> tail_;
    std::array<uint8_t, kWheelSlots> tail_n_;  // events written to the slot's tail chunk
    std::array<uint64_t, kWords> bits_{};
    std::array<uint64_t, kSummaryWords> summary_{};
    std::vector<Event> far_;  // binary min-heap on (key, seq); an Event here carries its key as time
};

}  // namespace rocemu::sim
