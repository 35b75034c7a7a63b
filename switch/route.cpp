#include "switch/route.hpp"

namespace rocemu::sw {

Ipv6Key ipv6_key(const std::array<uint8_t, 16>& a) {
    Ipv6Key k = 0;
    for (uint8_t b : a) k = (k << 8) | b;
    return k;
}

RouteTable::Routed RouteTable::route_uncached(const PacketDesc& d) const {
    const uint32_t v = d.ipv6 ? v6_.lookup(ipv6_key(d.dst_v6)).value_or(kNoRoute)
                              : v4_.lookup(d.dst_v4).value_or(kNoRoute);
    const Group g = v < groups_.size() ? groups_[v] : Group{};
    if (!d.ipv6) {
        const bool fits = g.size <= 0xFFFF;
        cache_v4_[cache_slot(d.dst_v4)] = CachedV4{d.dst_v4, v, g.first, static_cast<uint16_t>(fits ? g.size : 0),
                                                   static_cast<uint16_t>(fits ? epoch_ : 0)};
    }
    return {v, g};
}

uint32_t RouteTable::add_neighbor(PortId port, const std::array<uint8_t, 6>& mac) {
    neighbors_.push_back(Neighbor{port, mac});
    return static_cast<uint32_t>(neighbors_.size() - 1);
}

uint32_t RouteTable::add_group(const std::vector<uint32_t>& neighbors) {
    groups_.push_back(Group{static_cast<uint32_t>(members_.size()), static_cast<uint32_t>(neighbors.size())});
    // A neighbor's port never changes once added, so copying it is safe.
    for (const uint32_t nb : neighbors) {
        members_.push_back(Member{nb, neighbors_.at(nb).port});
        member_nb_.push_back(nb);
    }
    return static_cast<uint32_t>(groups_.size() - 1);
}

uint32_t RouteTable::learn_host_v4(uint32_t ip, PortId port, const std::array<uint8_t, 6>& mac) {
    const uint32_t n = add_neighbor(port, mac);
    v4_.insert(ip, 32, add_group({n}));
    new_epoch();
    return n;
}

uint32_t RouteTable::learn_host_v6(const std::array<uint8_t, 16>& ip, PortId port, const std::array<uint8_t, 6>& mac) {
    const uint32_t n = add_neighbor(port, mac);
    v6_.insert(ipv6_key(ip), 128, add_group({n}));
    return n;
}
}  // namespace rocemu::sw
