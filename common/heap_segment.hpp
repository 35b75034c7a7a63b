// A heap of its own for a virtual-time fabric.
//
// A fabric of hundreds of NICs is thousands of objects and vectors, built
// one after another. In a fresh process the heap hands them out densely and
// in order; after a big run (a sweep builds one fabric per size in one
// process) they land in the holes the last fabric left all over the heap,
// and the same 256-host fabric then runs 20-25 % slower per packet-hop
// (fabric/bench/README.md, `rocemu_fabric_bench --scatter-heap`).
//
// So a fabric builds its objects in a segment of its own: while a
// HeapSegment::Use is alive on a thread, that thread's operator new bumps
// through the segment (16-byte aligned, or as asked); operator delete of such
// a block only counts it. A segment's pages go back to the kernel, and the
// segment to the free list, once its owner has closed it (~HeapSegment) and
// its last block has been freed, whichever comes last: a block that outlives
// the fabric (an error message, a report row) stays valid.
//
// The segments are slices of one region of address space reserved at the
// first use (kSegments of kSegmentBytes, MAP_NORESERVE, on transparent huge
// pages). Without it (the reservation refused, every segment taken, a
// segment full, or a sanitizer build, whose allocator must see every block)
// operator new falls through to malloc, as it always does outside a Use.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rocemu {

class HeapSegment {
public:
    static constexpr std::size_t kSegments = 32;
    static constexpr std::size_t kSegmentBytes = std::size_t{16} << 30;

    // Takes a free segment, if there is one.
    HeapSegment();
    // Closes it: no further Use; its memory is released with its last block.
    ~HeapSegment();
    HeapSegment(const HeapSegment&) = delete;
    HeapSegment& operator=(const HeapSegment&) = delete;

    // While alive, this thread's operator new takes memory from the segment
    // (a no-op without one). Nests: the previous segment is restored.
    class Use {
    public:
        explicit Use(const HeapSegment& s);
        ~Use();
        Use(const Use&) = delete;
        Use& operator=(const Use&) = delete;

    private:
        int prev_;
    };

    bool active() const { return index_ >= 0; }
    // Bytes handed out so far (freed ones included: it only grows).
    std::size_t used() const;

    // Process-wide figures, for tests.
    struct Stats {
        std::size_t open = 0;      // segments with an owner
        std::size_t held = 0;      // closed segments waiting for their last blocks
        std::size_t released = 0;  // segments given back so far
    };
    static Stats stats();
    // Whether `p` lies in a segment.
    static bool owns(const void* p);

private:
    int index_ = -1;
};

}  // namespace rocemu
