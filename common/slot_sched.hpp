// When each slot of a table (a QP, a flow) next has something for each of
// its owner's scans to do, in a min tree over the slots.
//
// An owner that answers "when is my next event" after every event, and acts
// on a few of hundreds of slots at each, keeps per slot and per key (one key
// per scan) a time from which that scan must look at the slot (Nanos::max():
// never), a pure function of the slot's state. Whoever may change a slot
// marks it; the owner recomputes the marked slots (flush) before it reads the
// tree. Then min(key) is the earliest such time over all slots, and for_due()
// visits the slots whose time has come, in slot order, as a scan of every
// slot would: a slot the walk passes by is one the scan would have found
// nothing to do at. Used by the transport engine (QpSched) and the fabric's
// traffic generator NIC.
//
// Plain data: no allocation but when the slot count grows.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/units.hpp"

namespace rocemu {

template <std::size_t K>
class SlotSched {
public:
    using Times = std::array<Nanos, K>;
    static constexpr Nanos kAlways{INT64_MIN};
    static constexpr Times kNever = [] {
        Times t{};
        t.fill(Nanos::max());
        return t;
    }();

    SlotSched() { resize(1); }

    // Room for `slots` slots (never shrinks); new slots are never due.
    void resize(uint32_t slots) {
        if (slots <= leaves_) return;
        uint32_t p = leaves_ ? leaves_ : 1;
        while (p < slots) p *= 2;
        std::vector<Times> old(2 * size_t{p}, kNever);
        old.swap(tree_);
        for (uint32_t s = 0; s < leaves_; ++s) tree_[p + s] = old[leaves_ + s];
        for (uint32_t i = p - 1; i >= 1; --i) tree_[i] = lower(tree_[2 * i], tree_[2 * i + 1]);
        leaves_ = p;
        dirty_flag_.resize(p, 0);
        dirty_.reserve(p);
    }

    // The slot may have changed (or is gone): recompute it at the next flush.
    void mark(uint32_t slot) {
        if (dirty_flag_[slot]) return;
        dirty_flag_[slot] = 1;
        dirty_.push_back(slot);
    }
    bool marked_any() const { return !dirty_.empty(); }

    // Recomputes every marked slot: times(slot) returns its Times.
    template <typename F>
    void flush(F&& times) {
        for (const uint32_t s : dirty_) {
            dirty_flag_[s] = 0;
            set(s, times(s));
        }
        dirty_.clear();
    }

    Nanos min(std::size_t k) const { return tree_[1][k]; }

    // A debug check for owners: aborts, naming `owner`, the slot and the
    // key, when a slot of [0, slots) holds other times than times(slot) (a
    // change nobody marked). Call it right after a flush.
    template <typename F>
    void verify(uint32_t slots, F&& times, const char* owner) const {
        for (uint32_t i = 0; i < slots; ++i) {
            const Times t = times(i);
            for (std::size_t k = 0; k < K; ++k)
                if (at(i)[k] != t[k]) {
                    std::fprintf(stderr, "%s slot %u changed unmarked (key %zu: %lld kept, %lld now)\n", owner, i, k,
                                 static_cast<long long>(at(i)[k].v), static_cast<long long>(t[k].v));
                    std::abort();
                }
        }
    }
    const Times& at(uint32_t slot) const { return tree_[leaves_ + slot]; }

    // Calls f(slot) for each slot in [lo, hi) whose time for `k` is <= now,
    // in slot order, until f returns false (then returns false). The times
    // are those of the last flush.
    template <typename F>
    bool for_due(std::size_t k, Nanos now, uint32_t lo, uint32_t hi, F&& f) const {
        if (lo >= hi || tree_[1][k] > now) return true;
        return walk(k, 1, 0, leaves_, now, lo, hi, f);
    }

private:
    static Times lower(const Times& a, const Times& b) {
        Times m;
        for (std::size_t k = 0; k < K; ++k) m[k] = std::min(a[k], b[k]);
        return m;
    }

    void set(uint32_t slot, const Times& t) {
        uint32_t i = leaves_ + slot;
        if (tree_[i] == t) return;
        tree_[i] = t;
        // Up while a minimum changes.
        for (i /= 2; i >= 1; i /= 2) {
            const Times m = lower(tree_[2 * i], tree_[2 * i + 1]);
            if (tree_[i] == m) break;
            tree_[i] = m;
        }
    }

    template <typename F>
    bool walk(std::size_t k, uint32_t node, uint32_t nlo, uint32_t nhi, Nanos now, uint32_t lo, uint32_t hi, F& f) const {
        if (nhi <= lo || nlo >= hi || tree_[node][k] > now) return true;
        if (nhi - nlo == 1) return f(nlo);
        const uint32_t mid = nlo + (nhi - nlo) / 2;
        return walk(k, 2 * node, nlo, mid, now, lo, hi, f) && walk(k, 2 * node + 1, mid, nhi, now, lo, hi, f);
    }

    uint32_t leaves_ = 0;      // a power of two
    std::vector<Times> tree_;  // node i's children are 2i and 2i+1; slot s is node leaves_ + s
    std::vector<uint8_t> dirty_flag_;
    std::vector<uint32_t> dirty_;
};

}  // namespace rocemu
