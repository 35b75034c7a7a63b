#include "common/heap_segment.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>

#include "common/sanitizer.hpp"

namespace rocemu {
namespace {

#ifdef ROCEMU_SANITIZED_HEAP
constexpr bool kEnabled = false;
#else
constexpr bool kEnabled = true;
#endif

constexpr std::size_t kRegionBytes = HeapSegment::kSegments * HeapSegment::kSegmentBytes;
constexpr std::size_t kHugePage = std::size_t{2} << 20;

enum class State : uint8_t { Free, Open, Closed };

struct Segment {
    std::atomic<std::size_t> next{0};  // bump offset
    std::atomic<std::size_t> live{0};  // blocks not freed, plus 1 while the owner has it open
    State state = State::Free;         // under g_mu
};

// Constant-initialised: operator new may run before any constructor.
constinit std::mutex g_mu;
constinit std::atomic<uintptr_t> g_base{0};
constinit bool g_tried = false;  // under g_mu
constinit Segment g_seg[HeapSegment::kSegments];
constinit std::atomic<std::size_t> g_released{0};
constinit thread_local int tl_seg = -1;

uint8_t* seg_base(int i) {
    return reinterpret_cast<uint8_t*>(g_base.load(std::memory_order_relaxed)) +
           static_cast<std::size_t>(i) * HeapSegment::kSegmentBytes;
}

// Under g_mu.
bool reserve() {
    if (g_base.load(std::memory_order_relaxed) != 0) return true;
    if (g_tried || !kEnabled) return false;
    g_tried = true;
    // One huge page more than the region, whose start is then rounded up to
    // a huge page: only 2 MiB-aligned ranges get transparent huge pages.
    void* p = mmap(nullptr, kRegionBytes + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    const uintptr_t base = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
    madvise(reinterpret_cast<void*>(base), kRegionBytes, MADV_HUGEPAGE);  // advice only: 4 KiB pages if THP is off
    g_base.store(base, std::memory_order_release);
    return true;
}

// The segment's last reference is gone: its pages back to the kernel, the
// segment to the free list.
void release(int i) {
    Segment& s = g_seg[i];
    const std::size_t used = (s.next.load(std::memory_order_relaxed) + kHugePage - 1) & ~(kHugePage - 1);
    if (used) madvise(seg_base(i), used, MADV_DONTNEED);
    s.next.store(0, std::memory_order_relaxed);
    std::lock_guard lock(g_mu);
    s.state = State::Free;
    g_released.fetch_add(1, std::memory_order_relaxed);
}

void unref(int i) {
    if (g_seg[i].live.fetch_sub(1, std::memory_order_acq_rel) == 1) release(i);
}

void* seg_alloc(int i, std::size_t n, std::size_t align) {
    Segment& s = g_seg[i];
    if (n == 0) n = 1;
    // Segments start on a huge page, so offsets aligned up to 2 MiB are
    // addresses aligned as much; a larger alignment goes to malloc.
    if (align > kHugePage) return nullptr;
    std::size_t off = s.next.load(std::memory_order_relaxed), at;
    do {
        at = (off + align - 1) & ~(align - 1);
        if (at + n > HeapSegment::kSegmentBytes || at + n < at) return nullptr;  // full: malloc's
    } while (!s.next.compare_exchange_weak(off, at + n, std::memory_order_relaxed));
    s.live.fetch_add(1, std::memory_order_relaxed);
    return seg_base(i) + at;
}

int owner_of(const void* p) {
    const uintptr_t b = g_base.load(std::memory_order_acquire);
    const uintptr_t off = reinterpret_cast<uintptr_t>(p) - b;
    if (b == 0 || off >= kRegionBytes) return -1;
    return static_cast<int>(off / HeapSegment::kSegmentBytes);
}

}  // namespace

HeapSegment::HeapSegment() {
    std::lock_guard lock(g_mu);
    if (!reserve()) return;
    for (int i = 0; i < static_cast<int>(kSegments); ++i) {
        if (g_seg[i].state != State::Free) continue;
        g_seg[i].state = State::Open;
        g_seg[i].live.store(1, std::memory_order_relaxed);
        index_ = i;
        return;
    }
}

HeapSegment::~HeapSegment() {
    if (index_ < 0) return;
    // A Use must not outlive its segment; should one, its thread's blocks go
    // back to malloc rather than into a closed segment.
    if (tl_seg == index_) tl_seg = -1;
    {
        std::lock_guard lock(g_mu);
        g_seg[index_].state = State::Closed;
    }
    unref(index_);
}

HeapSegment::Use::Use(const HeapSegment& s) : prev_(tl_seg) {
    if (s.index_ >= 0) tl_seg = s.index_;
}

HeapSegment::Use::~Use() { tl_seg = prev_; }

std::size_t HeapSegment::used() const {
    return index_ < 0 ? 0 : g_seg[index_].next.load(std::memory_order_relaxed);
}

HeapSegment::Stats HeapSegment::stats() {
    Stats st;
    std::lock_guard lock(g_mu);
    for (const Segment& s : g_seg) {
        st.open += s.state == State::Open;
        st.held += s.state == State::Closed;
    }
    st.released = g_released.load(std::memory_order_relaxed);
    return st;
}

bool HeapSegment::owns(const void* p) { return owner_of(p) >= 0; }

namespace heap_detail {

// operator new's memory: the thread's segment, else malloc, retrying
// through the new handler as the standard's operator new does. Null when
// nothing is left.
void* allocate(std::size_t n, std::size_t align) {
    if (tl_seg >= 0)
        if (void* p = seg_alloc(tl_seg, n, align)) return p;
    if (n == 0) n = 1;
    for (;;) {
        void* p = nullptr;
        if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__)
            p = std::malloc(n);
        else if (posix_memalign(&p, align, n) != 0)
            p = nullptr;
        if (p) return p;
        const std::new_handler h = std::get_new_handler();
        if (!h) return nullptr;
        h();
    }
}

void deallocate(void* p) {
    if (p == nullptr) return;
    if (const int i = owner_of(p); i >= 0)
        unref(i);
    else
        std::free(p);
}

}  // namespace heap_detail
}  // namespace rocemu

#ifndef ROCEMU_SANITIZED_HEAP
// The replaceable allocation functions ([new.delete]), all of them, so that
// every block, whichever form allocated it, is freed by the matching code.
namespace {
constexpr std::size_t kDefaultAlign = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

void* new_or_throw(std::size_t n, std::size_t align) {
    if (void* p = rocemu::heap_detail::allocate(n, align)) return p;
    throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return new_or_throw(n, kDefaultAlign); }
void* operator new[](std::size_t n) { return new_or_throw(n, kDefaultAlign); }
void* operator new(std::size_t n, std::align_val_t a) { return new_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return new_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return rocemu::heap_detail::allocate(n, kDefaultAlign);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return rocemu::heap_detail::allocate(n, kDefaultAlign);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return rocemu::heap_detail::allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return rocemu::heap_detail::allocate(n, static_cast<std::size_t>(a));
}

void operator delete(void* p) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete[](void* p) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete(void* p, std::size_t) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete[](void* p, std::size_t) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete(void* p, std::align_val_t) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete[](void* p, std::align_val_t) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { rocemu::heap_detail::deallocate(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    rocemu::heap_detail::deallocate(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    rocemu::heap_detail::deallocate(p);
}
#endif
