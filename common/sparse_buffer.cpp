#include "common/sparse_buffer.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <new>

namespace rocemu {
namespace {

struct Slice {
    std::size_t off = 0;
    std::size_t bytes = 0;
};

// Freed slices kept for reuse; past that many, a freed slice's address
// space is left unused (its pages are back with the kernel either way).
constexpr std::size_t kFreeSlices = 4096;

// Constant-initialised and never destroyed: a buffer may be created or
// freed at any time, static destruction included.
constinit std::mutex g_mu;
constinit uint8_t* g_base = nullptr;  // under g_mu, as the rest
constinit bool g_tried = false;
constinit std::size_t g_next = 0;  // bump offset
constinit std::array<Slice, kFreeSlices> g_free{};
constinit std::size_t g_nfree = 0;

bool reserve() {
    if (g_base != nullptr) return true;
    if (g_tried) return false;
    g_tried = true;
    void* p = mmap(nullptr, SparseBuffer::kRegionBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    madvise(p, SparseBuffer::kRegionBytes, MADV_NOHUGEPAGE);  // advice: a 4 KiB page per first write
    g_base = static_cast<uint8_t*>(p);
    return true;
}

// A slice of `bytes` (whole pages), all zero, or nullptr.
uint8_t* take(std::size_t bytes) {
    std::lock_guard lock(g_mu);
    // The slice of that size freed last (its address space the most
    // recently used); the list keeps its order.
    for (std::size_t i = g_nfree; i-- > 0;)
        if (g_free[i].bytes == bytes) {
            const std::size_t off = g_free[i].off;
            std::copy(g_free.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                      g_free.begin() + static_cast<std::ptrdiff_t>(g_nfree), g_free.begin() + static_cast<std::ptrdiff_t>(i));
            --g_nfree;
            return g_base + off;
        }
    if (!reserve() || bytes > SparseBuffer::kRegionBytes - g_next) return nullptr;
    uint8_t* p = g_base + g_next;
    g_next += bytes;
    return p;
}

void give_back(uint8_t* p, std::size_t bytes) {
    madvise(p, bytes, MADV_DONTNEED);  // the pages go back, and read as zero from now on
    std::lock_guard lock(g_mu);
    if (g_nfree < kFreeSlices) g_free[g_nfree++] = Slice{static_cast<std::size_t>(p - g_base), bytes};
}

}  // namespace

SparseBuffer::SparseBuffer(std::size_t bytes) {
    if (bytes == 0) return;
    const std::size_t whole = whole_pages(bytes);
    data_ = take(whole);
    in_region_ = data_ != nullptr;
    if (data_ == nullptr) data_ = static_cast<uint8_t*>(std::calloc(whole, 1));
    if (data_ == nullptr) throw std::bad_alloc();
    size_ = bytes;
}

SparseBuffer& SparseBuffer::operator=(SparseBuffer&& o) noexcept {
    if (this != &o) {
        reset();
        data_ = o.data_;
        size_ = o.size_;
        in_region_ = o.in_region_;
        o.data_ = nullptr;
        o.size_ = 0;
        o.in_region_ = false;
    }
    return *this;
}

void SparseBuffer::reset() {
    if (data_ == nullptr) return;
    if (in_region_)
        give_back(data_, whole_pages(size_));
    else
        std::free(data_);
    data_ = nullptr;
    size_ = 0;
    in_region_ = false;
}

}  // namespace rocemu
