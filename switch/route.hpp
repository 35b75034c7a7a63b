// L3 forwarding state: longest-prefix match for IPv4 and IPv6, the neighbor
// (ARP/ND) table, ECMP next-hop groups and the 5-tuple hash.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "switch/types.hpp"

namespace rocemu::sw {

// Longest-prefix match: one open-addressing hash table per prefix length in
// use, probed from the longest length down, so a lookup costs about one
// probe per distinct length and allocates nothing. Tables are rebuilt on
// insert and erase (control plane only). The live runtime may use
// rte_lpm/rte_fib instead.
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
        const Key p = mask(prefix, len);
        auto& v = entries_[len];
        for (auto& e : v)
            if (e.prefix == p) {
                e.value = value;
                rebuild(len);
                return;
            }
        v.push_back(Slot{p, value, true});
        rebuild(len);
    }

    bool erase(Key prefix, int len) {
        const Key p = mask(prefix, len);
        auto& v = entries_[len];
        for (auto it = v.begin(); it != v.end(); ++it)
            if (it->prefix == p) {
                v.erase(it);
                rebuild(len);
                return true;
            }
        return false;
    }

    std::optional<uint32_t> lookup(Key addr) const {
        for (const uint8_t len : lengths_) {
            const Table& t = tables_[len];
            const Key p = mask(addr, len);
            for (std::size_t i = hash(p) & t.mask;; i = (i + 1) & t.mask) {
                const Slot& s = t.slots[i];
                if (!s.used) break;
                if (s.prefix == p) return s.value;
            }
        }
        return std::nullopt;
    }

private:
    struct Slot {
        Key prefix{};
        uint32_t value = 0;
        bool used = false;
    };
    struct Table {
        std::size_t mask = 0;
        std::vector<Slot> slots;
    };

    static std::size_t hash(Key k) {
        uint64_t x = static_cast<uint64_t>(k);
        if constexpr (kBits > 64) x ^= static_cast<uint64_t>(k >> 64) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        return static_cast<std::size_t>(x);
    }

    // At most half full, so every probe sequence ends at an empty slot.
    void rebuild(int len) {
        const auto& v = entries_[len];
        Table& t = tables_[len];
        std::size_t cap = 4;
        while (cap < 2 * v.size()) cap *= 2;
        t.slots.assign(cap, Slot{});
        t.mask = cap - 1;
        for (const Slot& e : v) {
            std::size_t i = hash(e.prefix) & t.mask;
            while (t.slots[i].used) i = (i + 1) & t.mask;
            t.slots[i] = e;
        }
        lengths_.clear();
        for (int l = kBits; l >= 0; --l)
            if (!entries_[l].empty()) lengths_.push_back(static_cast<uint8_t>(l));
    }

    std::array<std::vector<Slot>, kBits + 1> entries_{};
    std::array<Table, kBits + 1> tables_{};
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
    // A group of equal-cost next hops (neighbor ids). Traffic routed to an
    // empty group drops as no_route.
    uint32_t add_group(const std::vector<uint32_t>& neighbors);

    void add_route_v4(uint32_t prefix, int len, uint32_t group) {
        v4_.insert(prefix, len, group);
        new_epoch();
    }
    void add_route_v6(const std::array<uint8_t, 16>& prefix, int len, uint32_t group) {
        v6_.insert(ipv6_key(prefix), len, group);
    }
    void add_connected_v4(uint32_t prefix, int len) {
        v4_.insert(prefix, len, kUnresolved);
        new_epoch();
    }
    void add_connected_v6(const std::array<uint8_t, 16>& prefix, int len) {
        v6_.insert(ipv6_key(prefix), len, kUnresolved);
    }
    // ARP / ND resolution of a directly attached host: a host route to a
    // single-member group. Returns the neighbor id.
    uint32_t learn_host_v4(uint32_t ip, PortId port, const std::array<uint8_t, 6>& mac);
    uint32_t learn_host_v6(const std::array<uint8_t, 16>& ip, PortId port, const std::array<uint8_t, 6>& mac);

    // Group id, kUnresolved, or kNoRoute when no route matches. Not safe to
    // call from two threads at once (it fills the cache). A plain integer,
    // and the cache hit inline: an optional returned through the stack
    // stalled the load that read it (store forwarding), per packet.
    static constexpr uint32_t kNoRoute = 0xFFFFFFFE;  // never a group id
    uint32_t route(const PacketDesc& d) const { return route_group(d).group; }
    // What forwarding reads of a group: where its members start in
    // members() and how many there are.
    struct Group {
        uint32_t first = 0;
        uint32_t size = 0;
    };
    // route() and, when it is a group, the group itself: an IPv4 cache hit
    // reads the group from its cache entry (issue #8: reading groups_ after
    // the entry was a second dependent miss a packet at 256 hosts).
    struct Routed {
        uint32_t group;
        Group g;  // {0, 0} unless group is a group id
    };
    Routed route_group(const PacketDesc& d) const {
        if (!d.ipv6) {
            const CachedV4& c = cache_v4_[cache_slot(d.dst_v4)];
            if (c.epoch == epoch_ && c.addr == d.dst_v4) return {c.value, {c.first, c.size}};
        }
        return route_uncached(d);
    }
    // Empties the IPv4 cache, as a table no packet was routed through has
    // it (the routes stay): Switch::reset.
    void clear_cache() { cache_v4_.fill(CachedV4{}); }
    // route() with nullopt for kNoRoute.
    std::optional<uint32_t> lookup(const PacketDesc& d) const {
        const uint32_t g = route(d);
        if (g == kNoRoute) return std::nullopt;
        return g;
    }

    // The neighbor ids of a group, in the order add_group was given them.
    std::span<const uint32_t> group(uint32_t id) const {
        const Group& g = groups_[id];
        return {member_nb_.data() + g.first, g.size};
    }
    // A group member with its neighbor's port beside it, so picking one and
    // finding the egress port are two loads from two flat arrays (groups_,
    // members_), not a chain through a vector per group and the neighbor.
    struct Member {
        uint32_t neighbor = 0;
        PortId port = 0;
    };
    const Group& group_ref(uint32_t id) const { return groups_[id]; }
    const Member& member(uint32_t i) const { return members_[i]; }
    const Neighbor& neighbor(uint32_t id) const { return neighbors_[id]; }
    std::size_t num_neighbors() const { return neighbors_.size(); }

private:
    // IPv4 lookups go through a direct-mapped cache of recent destinations:
    // one probe instead of one per prefix length in use. Any route change
    // starts a new epoch, which empties it.
    static constexpr int kCacheBits = 8;
    static std::size_t cache_slot(uint32_t addr) { return (addr * 0x9E3779B1u) >> (32 - kCacheBits); }
    Routed route_uncached(const PacketDesc& d) const;
    // An entry holds its group's first member and size (groups never change
    // once added), so a hit is one line. A group of more than 65535 members
    // is not cached (its size would not fit); epoch 0 never matches.
    struct CachedV4 {
        uint32_t addr = 0;
        uint32_t value = kNoRoute;
        uint32_t first = 0;
        uint16_t size = 0;
        uint16_t epoch = 0;
    };
    static_assert(sizeof(CachedV4) == 16);
    // Any route change: entries of older epochs no longer match. 16 bits
    // wrap after 65535 changes; the cache is emptied then, so no entry of
    // an epoch before the wrap can match again.
    void new_epoch() {
        if (++epoch_ == 0) {
            clear_cache();
            epoch_ = 1;
        }
    }
    // What a routed packet reads besides its cache entry, its group and its
    // members, in the first 64 bytes (one line where the switch aligns the
    // table; issue #8): the epoch and the vectors' starts, before the 4 KiB
    // cache and the LPM tables.
    uint16_t epoch_ = 1;
    std::vector<Group> groups_;
    std::vector<Member> members_;  // every group's members, back to back
    std::vector<Neighbor> neighbors_;
    mutable std::array<CachedV4, std::size_t{1} << kCacheBits> cache_v4_{};
    Lpm<uint32_t> v4_;
    Lpm<Ipv6Key> v6_;
    std::vector<uint32_t> member_nb_;  // the same neighbor ids, for group()
};

namespace detail {
inline constexpr uint64_t kHashMul = 0x9E3779B97F4A7C15ull;
// The murmur3 64-bit finaliser: full avalanche, so every input bit (notably
// the low bits of the UDP source port) moves every output bit.
constexpr uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

inline uint64_t fold(const std::array<uint8_t, 16>& a) {
    const Ipv6Key k = ipv6_key(a);
    return static_cast<uint64_t>(k) ^ fmix64(static_cast<uint64_t>(k >> 64));
}
}  // namespace detail

// Hash of the selected 5-tuple fields (plus ingress port if asked), mixed so
// that consecutive UDP source ports spread evenly over any member count.
// Inline (forced: left to itself GCC made it a call from the switch core's
// admission path): every ECMP-routed packet needs it.
// In two halves, so that a burst whose packets share their addresses folds
// them in once: the addresses (the seed with SRC_IP and DST_IP), then the rest.
[[gnu::always_inline]] inline uint64_t flow_hash_addrs(const PacketDesc& d, uint8_t fields, uint64_t seed) {
    // Fields are folded in with one multiply each; the final avalanche makes
    // every input bit (notably the low bits of the UDP source port) reach
    // the high bits that pick the member.
    uint64_t h = seed ^ 0x5bd1e9955bd1e995ull;
    if (fields & kHashSrcIp) h = (h ^ (d.ipv6 ? detail::fold(d.src_v6) : d.src_v4)) * detail::kHashMul;
    if (fields & kHashDstIp) h = (h ^ (d.ipv6 ? detail::fold(d.dst_v6) : d.dst_v4)) * detail::kHashMul;
    return h;
}
// The rest: protocol, ingress port and the two L4 ports packed in one word
// (bits 48-55, 32-47, 16-31, 0-15), the fields not selected masked out.
// The mask depends on the configuration only: a caller hashing many packets
// computes it once (flow_hash_l4_mask) instead of testing four fields a packet.
constexpr uint64_t flow_hash_l4_mask(uint8_t fields) {
    return (fields & kHashProto ? uint64_t{0xFF} << 48 : 0) | (fields & kHashInPort ? uint64_t{0xFFFF} << 32 : 0) |
           (fields & kHashSrcPort ? uint64_t{0xFFFF} << 16 : 0) | (fields & kHashDstPort ? uint64_t{0xFFFF} : 0);
}
[[gnu::always_inline]] inline uint64_t flow_hash_rest_masked(uint64_t addrs, const PacketDesc& d, uint64_t l4_mask) {
    const uint64_t l4 = (uint64_t{d.ip_proto} << 48 | uint64_t{d.in_port} << 32 | uint64_t{d.src_port} << 16 |
                         uint64_t{d.dst_port}) & l4_mask;
    return detail::fmix64((addrs ^ l4) * detail::kHashMul);
}
[[gnu::always_inline]] inline uint64_t flow_hash_rest(uint64_t addrs, const PacketDesc& d, uint8_t fields) {
    return flow_hash_rest_masked(addrs, d, flow_hash_l4_mask(fields));
}
[[gnu::always_inline]] inline uint64_t flow_hash(const PacketDesc& d, uint8_t fields, uint64_t seed) {
    return flow_hash_rest(flow_hash_addrs(d, fields, seed), d, fields);
}

}  // namespace rocemu::sw
