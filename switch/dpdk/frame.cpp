#include "switch/dpdk/frame.hpp"

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::sw::live {

using wire::load_be16;
using wire::load_be32;
using wire::store_be16;

using frame_detail::find_l3;
using frame_detail::kIpv4Min;
using frame_detail::kIpv6Len;

namespace {
constexpr size_t kIcrcLen = 4;

// RFC 1624 incremental update of the IPv4 header checksum for one changed word.
void fix_checksum(uint8_t* ip, uint16_t old_word, uint16_t new_word) {
    uint32_t sum = static_cast<uint16_t>(~load_be16(ip + 10)) + static_cast<uint16_t>(~old_word) + new_word;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    store_be16(ip + 10, static_cast<uint16_t>(~sum));
}
}  // namespace

const char* to_string(RxKind k) {
    switch (k) {
        case RxKind::Data: return "data";
        case RxKind::Pfc: return "pfc";
        case RxKind::Pause: return "pause";
        case RxKind::NotIp: return "not_ip";
        case RxKind::Truncated: return "truncated";
    }
    return "unknown";
}

RxKind frame_detail::parse_control(std::span<const uint8_t> frame, size_t l3, PfcFrameDesc& pfc) {
    const uint8_t* f = frame.data();
    if (frame.size() < l3 + 2) return RxKind::Truncated;
    if (load_be16(f + l3) == wire::kPauseOpcode) return RxKind::Pause;
    wire::Pfc p;
    if (!wire::parse_pfc(frame, p)) return load_be16(f + l3) == wire::kPfcOpcode ? RxKind::Truncated : RxKind::NotIp;
    pfc.class_enable = p.class_enable;
    pfc.quanta = p.quanta;
    return RxKind::Pfc;
}

bool rewrite_l2(std::span<uint8_t> frame, const std::array<uint8_t, 6>& dst, const wire::MacAddr& src) {
    if (frame.size() < 12) return false;
    std::memcpy(frame.data(), dst.data(), 6);
    std::memcpy(frame.data() + 6, src.b.data(), 6);
    return true;
}

TtlResult decrement_ttl(std::span<uint8_t> frame) {
    const auto [l3, ethertype] = find_l3(frame);
    if (!l3) return TtlResult::NotIp;
    uint8_t* ip = frame.data() + l3;
    if (ethertype == wire::ethertype::kIpv4) {
        if (frame.size() < l3 + kIpv4Min) return TtlResult::NotIp;
        if (ip[8] <= 1) return TtlResult::Expired;
        const uint16_t old_word = load_be16(ip + 8);
        --ip[8];
        fix_checksum(ip, old_word, load_be16(ip + 8));
        return TtlResult::Decremented;
    }
    if (ethertype == wire::ethertype::kIpv6) {
        if (frame.size() < l3 + kIpv6Len) return TtlResult::NotIp;
        if (ip[7] <= 1) return TtlResult::Expired;
        --ip[7];
        return TtlResult::Decremented;
    }
    return TtlResult::NotIp;
}

bool corrupt_icrc(std::span<uint8_t> frame) {
    const auto [l3, ethertype] = find_l3(frame);
    if (!l3) return false;
    const uint8_t* ip = frame.data() + l3;
    size_t end = 0;  // one past the last byte the IP length covers
    if (ethertype == wire::ethertype::kIpv4 && frame.size() >= l3 + kIpv4Min)
        end = l3 + load_be16(ip + 2);
    else if (ethertype == wire::ethertype::kIpv6 && frame.size() >= l3 + kIpv6Len)
        end = l3 + kIpv6Len + load_be16(ip + 4);
    if (end < l3 + kIcrcLen || end > frame.size()) return false;
    frame[end - 1] ^= 0xFF;
    return true;
}

size_t build_pfc(const PfcFrameDesc& pfc, const wire::MacAddr& src, std::span<uint8_t> out) {
    wire::Pfc p;
    p.src = src;
    p.class_enable = pfc.class_enable;
    p.quanta = pfc.quanta;
    return wire::encode_pfc(p, out);
}

std::string describe_head(std::span<const uint8_t> head, size_t len) {
    if (wire::classify(head) != wire::FrameKind::Roce) {
        std::string s = wire::describe_other(head);
        if (len > head.size()) s += fmt::format(", {} bytes in all", len);
        return s;
    }
    wire::RocePacket p;
    const bool part = len > head.size();
    const wire::ParseError e = part ? wire::parse_roce_split(head, len, p) : wire::parse_roce(head, p);
    std::string s = e == wire::ParseError::SplitHeaders ? fmt::format("RoCEv2 ({} bytes)", len) : wire::describe_roce(p, e);
    // Only the head was kept: its ICRC was not read.
    if (part && s.ends_with(" icrc=ok")) s.replace(s.size() - 8, 8, " icrc not read");
    const auto [l3, ethertype] = find_l3(head);
    if (ethertype == wire::ethertype::kIpv4 && head.size() >= l3 + 9) s += fmt::format(" ttl {}", head[l3 + 8]);
    if (ethertype == wire::ethertype::kIpv6 && head.size() >= l3 + 8) s += fmt::format(" hop limit {}", head[l3 + 7]);
    return s;
}

}  // namespace rocemu::sw::live
