// Memory whose pages are committed one at a time, as each is first written:
// never because a neighbouring block was written, nor through a huge page
// around it. Zero-filled when handed out.
//
// For tables that are large and mostly never written. A spraying QP's
// reorder buffer is about 1 MiB (a slot of 4 KiB for each of 256 PSNs), of
// which a QP writes only the slots that reordering fills. From the heap such
// a table shares its pages with blocks that are written, and on transparent
// huge pages (a fabric's heap segment, or glibc's heap with
// glibc.malloc.hugetlb=1) a whole 2 MiB range is committed at its first
// write: every spraying QP's buffer became resident, 8.8 GB for a 64-host
// RC all-to-all.
//
// Buffers are page-aligned slices of one region of address space reserved
// at first use (MAP_NORESERVE, MADV_NOHUGEPAGE). A freed buffer's pages go
// back to the kernel at once (MADV_DONTNEED, so they read as zero again)
// and its slice to a free list of fixed size, for the next buffer of the
// same size. Without the region (the reservation refused, or full) a buffer
// is calloc's. The bookkeeping allocates nothing: buffers may be created
// while a HeapSegment is in use and outlive it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rocemu {

class SparseBuffer {
public:
    static constexpr std::size_t kPage = 4096;
    static constexpr std::size_t kRegionBytes = std::size_t{1} << 40;  // address space only
    // `bytes` rounded up to whole pages: what a buffer of that size takes.
    static constexpr std::size_t whole_pages(std::size_t bytes) { return (bytes + kPage - 1) & ~(kPage - 1); }

    SparseBuffer() = default;
    // Throws std::bad_alloc when neither the region nor calloc has room.
    explicit SparseBuffer(std::size_t bytes);
    ~SparseBuffer() { reset(); }
    SparseBuffer(SparseBuffer&& o) noexcept : data_(o.data_), size_(o.size_), in_region_(o.in_region_) {
        o.data_ = nullptr;
        o.size_ = 0;
        o.in_region_ = false;
    }
    SparseBuffer& operator=(SparseBuffer&& o) noexcept;
    SparseBuffer(const SparseBuffer&) = delete;
    SparseBuffer& operator=(const SparseBuffer&) = delete;

    uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    // Frees the buffer (its pages go back to the kernel); empty afterwards.
    void reset();
    // Whether it is a slice of the region (else calloc's): for tests.
    bool in_region() const { return in_region_; }

private:
    uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
    bool in_region_ = false;
};

}  // namespace rocemu
