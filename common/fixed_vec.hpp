// A fixed-capacity vector with no heap allocation, used for the effect buffers
// that pure cores write into. push_back reports overflow instead of throwing.
#pragma once

#include <array>
#include <cstddef>

namespace rocemu {

template <typename T, std::size_t N>
class FixedVec {
public:
    bool push_back(const T& v) {
        if (n_ == N) return false;
        items_[n_++] = v;
        return true;
    }
    T* emplace() { return n_ == N ? nullptr : &(items_[n_++] = T{}); }
    void clear() { n_ = 0; }
    std::size_t size() const { return n_; }
    static constexpr std::size_t capacity() { return N; }
    bool empty() const { return n_ == 0; }
    bool full() const { return n_ == N; }
    T& operator[](std::size_t i) { return items_[i]; }
    const T& operator[](std::size_t i) const { return items_[i]; }
    T* begin() { return items_.data(); }
    T* end() { return items_.data() + n_; }
    const T* begin() const { return items_.data(); }
    const T* end() const { return items_.data() + n_; }

private:
    std::array<T, N> items_{};
    std::size_t n_ = 0;
};

}  // namespace rocemu
