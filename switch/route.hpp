// L3 forwarding state: longest-prefix match for IPv4 and IPv6, the neighbor
// (ARP/ND) table, ECMP next-hop groups and the 5-tuple hash.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "switch/types.hpp"

namespace rocemu::sw {

// Longest-prefix match: one sorted array per prefix length, probed from the
// longest length present down with a binary search. O(L log n) per lookup,
// no allocation; the live runtime may swap in rte_lpm/rte_fib.
template <typename Key>
class Lpm {
public:
    static constexpr int kBits = sizeof(Key) * 8;

    static Key mask(Key addr, int len) {
        if (len == 0) return Key{0};
        return addr & static_cast<Key>(~Key{0} << (kBits - len));
    }

    // Inserts or replaces.
    void insert(Key prefix, int len, uint32_t value) {
        auto& v = by_len_[len];
        const Key p = mask(prefix, len);
        auto it = lower_bound(v, p);
        if (it != v.end() && it->prefix == p) {
            it->value = value;
            return;
        }
        v.insert(it, Entry{p, value});
        rebuild_lengths();
    }

    bool erase(Key prefix, int len) {
        auto& v = by_len_[len];
        const Key p = mask(prefix, len);
        auto it = lower_bound(v, p);
        if (it == v.end() || it->prefix != p) return false;
        v.erase(it);
        rebuild_lengths();
        return true;
    }

    std::optional<uint32_t> lookup(Key addr) const {
        for (const uint8_t len : lengths_) {
            const auto& v = by_len_[len];
            const Key p = mask(addr, len);
            auto it = lower_bound(v, p);
            if (it != v.end() && it->prefix == p) return it->value;
        }
        return std::nullopt;
    }

private:
    struct Entry {
        Key prefix;
        uint32_t value;
    };
    template <typename V>
    static auto lower_bound(V& v, Key p) {
        auto lo = v.begin();
        auto n = v.end() - lo;
        while (n > 0) {
            const auto half = n / 2;
            if ((lo + half)->prefix < p) {
                lo += half + 1;
                n -= half + 1;
            } else {
                n = half;
            }
        }
        return lo;
    }
    void rebuild_lengths() {
        lengths_.clear();
        for (int len = kBits; len >= 0; --len)
            if (!by_len_[len].empty()) lengths_.push_back(static_cast<uint8_t>(len));
    }

    std::array<std::vector<Entry>, kBits + 1> by_len_{};
    std::vector<uint8_t> lengths_;  // lengths in use, longest first
};

using Ipv6Key = unsigned __int128;
Ipv6Key ipv6_key(const std::array<uint8_t, 16>& a);

struct Neighbor {
    PortId port = 0;
    std::array<uint8_t, 6> mac{};
};

// Neighbor ids index neighbors(); group ids index groups(). A route points at
// a group; a connected subnet points at kUnresolved until its hosts are
// learned, each learned host adding its own /32 (/128) route.
class RouteTable {
public:
    static constexpr uint32_t kUnresolved = 0xFFFFFFFF;

    uint32_t add_neighbor(PortId port, const std::array<uint8_t, 6>& mac);
    // A group of equal-cost next hops (neighbor ids). Must be non-empty.
    uint32_t add_group(const std::vector<uint32_t>& neighbors);

    void add_route_v4(uint32_t prefix, int len, uint32_t group) { v4_.insert(prefix, len, group); }
    void add_route_v6(const std::array<uint8_t, 16>& prefix, int len, uint32_t group) {
        v6_.insert(ipv6_key(prefix), len, group);
    }
    void add_connected_v4(uint32_t prefix, int len) { v4_.insert(prefix, len, kUnresolved); }
    void add_connected_v6(const std::array<uint8_t, 16>& prefix, int len) {
        v6_.insert(ipv6_key(prefix), len, kUnresolved);
    }
    // ARP / ND resolution of a directly attached host: a host route to a
    // single-member group. Returns the neighbor id.
    uint32_t learn_host_v4(uint32_t ip, PortId port, const std::array<uint8_t, 6>& mac);
    uint32_t learn_host_v6(const std::array<uint8_t, 16>& ip, PortId port, const std::array<uint8_t, 6>& mac);

    // Group id, kUnresolved, or nullopt when no route matches.
    std::optional<uint32_t> lookup(const PacketDesc& d) const {
        return d.ipv6 ? v6_.lookup(ipv6_key(d.dst_v6)) : v4_.lookup(d.dst_v4);
    }

    const std::vector<uint32_t>& group(uint32_t id) const { return groups_[id]; }
    const Neighbor& neighbor(uint32_t id) const { return neighbors_[id]; }
    std::size_t num_neighbors() const { return neighbors_.size(); }

private:
    Lpm<uint32_t> v4_;
    Lpm<Ipv6Key> v6_;
    std::vector<Neighbor> neighbors_;
    std::vector<std::vector<uint32_t>> groups_;
};

// Hash of the selected 5-tuple fields (plus ingress port if asked), mixed so
// that consecutive UDP source ports spread evenly over any member count.
uint64_t flow_hash(const PacketDesc& d, uint8_t fields, uint64_t seed);

}  // namespace rocemu::sw
