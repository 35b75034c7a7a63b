// The virtual-time event queue: a binary min-heap of small plain events
// ordered by (time, seq). `seq` is assigned at push, so events due at the
// same nanosecond run in the order they were scheduled. That FIFO rule is
// what makes a run reproducible without "+1 ns" tie-breaks.
#pragma once

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
    // Capacity grows by doubling and never shrinks, so a run that has
    // reached its peak backlog allocates nothing more.
    void reserve(std::size_t n) { heap_.reserve(n); }

    void push(Nanos time, EventKind kind, uint32_t target, uint64_t arg) {
        heap_.push_back(Event{time, next_seq_++, arg, target, kind});
        sift_up(heap_.size() - 1);
    }

    bool empty() const { return heap_.empty(); }
    std::size_t size() const { return heap_.size(); }
    std::size_t capacity() const { return heap_.capacity(); }
    // Events pushed so far; also the seq the next push gets.
    uint64_t pushed() const { return next_seq_; }

    // Precondition: !empty().
    const Event& top() const { return heap_.front(); }

    // Precondition: !empty().
    Event pop() {
        const Event out = heap_.front();
        const Event last = heap_.back();
        heap_.pop_back();
        if (!heap_.empty()) sift_down(last);
        return out;
    }

private:
    static bool before(const Event& a, const Event& b) {
        return a.time < b.time || (a.time == b.time && a.seq < b.seq);
    }

    void sift_up(std::size_t i) {
        const Event e = heap_[i];
        while (i > 0) {
            const std::size_t parent = (i - 1) / 2;
            if (!before(e, heap_[parent])) break;
            heap_[i] = heap_[parent];
            i = parent;
        }
        heap_[i] = e;
    }

    // Places `e` (the former last element) starting from the root hole.
    void sift_down(const Event& e) {
        const std::size_t n = heap_.size();
        std::size_t i = 0;
        for (;;) {
            std::size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
            if (!before(heap_[child], e)) break;
            heap_[i] = heap_[child];
            i = child;
        }
        heap_[i] = e;
    }

    std::vector<Event> heap_;
    uint64_t next_seq_ = 0;
};

}  // namespace rocemu::sim
