#include "switch/route.hpp"

namespace rocemu::sw {

namespace {
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

uint64_t fold(const std::array<uint8_t, 16>& a) {
    const Ipv6Key k = ipv6_key(a);
    return static_cast<uint64_t>(k) ^ fmix64(static_cast<uint64_t>(k >> 64));
}
}  // namespace

Ipv6Key ipv6_key(const std::array<uint8_t, 16>& a) {
    Ipv6Key k = 0;
    for (uint8_t b : a) k = (k << 8) | b;
    return k;
}

uint32_t RouteTable::add_neighbor(PortId port, const std::array<uint8_t, 6>& mac) {
    neighbors_.push_back(Neighbor{port, mac});
    return static_cast<uint32_t>(neighbors_.size() - 1);
}

uint32_t RouteTable::add_group(const std::vector<uint32_t>& neighbors) {
    groups_.push_back(neighbors);
    return static_cast<uint32_t>(groups_.size() - 1);
}

uint32_t RouteTable::learn_host_v4(uint32_t ip, PortId port, const std::array<uint8_t, 6>& mac) {
    const uint32_t n = add_neighbor(port, mac);
    v4_.insert(ip, 32, add_group({n}));
    return n;
}

uint32_t RouteTable::learn_host_v6(const std::array<uint8_t, 16>& ip, PortId port, const std::array<uint8_t, 6>& mac) {
    const uint32_t n = add_neighbor(port, mac);
    v6_.insert(ipv6_key(ip), 128, add_group({n}));
    return n;
}

uint64_t flow_hash(const PacketDesc& d, uint8_t fields, uint64_t seed) {
    // Fields are folded in with one multiply each; the final avalanche makes
    // every input bit (notably the low bits of the UDP source port) reach
    // the high bits that pick the member.
    constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
    uint64_t h = seed ^ 0x5bd1e9955bd1e995ull;
    if (fields & kHashSrcIp) h = (h ^ (d.ipv6 ? fold(d.src_v6) : d.src_v4)) * kMul;
    if (fields & kHashDstIp) h = (h ^ (d.ipv6 ? fold(d.dst_v6) : d.dst_v4)) * kMul;
    const uint64_t l4 = (fields & kHashProto ? uint64_t{d.ip_proto} << 48 : 0) |
                        (fields & kHashInPort ? uint64_t{d.in_port} << 32 : 0) |
                        (fields & kHashSrcPort ? uint64_t{d.src_port} << 16 : 0) |
                        (fields & kHashDstPort ? uint64_t{d.dst_port} : 0);
    return fmix64((h ^ l4) * kMul);
}

}  // namespace rocemu::sw
