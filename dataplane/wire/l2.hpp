// Ethernet, 802.1Q, ARP, IEEE 802.1Qbb PFC and IP helpers (checksum, ECN).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {

struct EthView {
    L2 l2;
    uint16_t l3_off = 0;
};

// Reads the Ethernet header and an optional 802.1Q tag. False if truncated.
bool parse_eth(std::span<const uint8_t> frame, EthView& out);
// The same into `l2` (every field written); returns the L3 offset, 0 if truncated.
size_t parse_eth(std::span<const uint8_t> frame, L2& l2);
// Writes the Ethernet header (and tag when l2.vlan); returns its length.
size_t write_eth(uint8_t* f, const L2& l2);

// The Internet checksum over `len` bytes (0 when verifying a correct header).
uint16_t ip_checksum(const uint8_t* p, size_t len);

// Rewrites the ECN bits of an IPv4/IPv6 packet in place, keeping the IPv4
// header checksum right (RFC 1624 incremental update). The ICRC does not
// cover TOS, so a switch can mark CE without touching it. False if the frame
// is not IP or too short.
bool set_ip_ecn(std::span<uint8_t> frame, uint8_t ecn_bits);

// --- ARP (Ethernet/IPv4 only) -------------------------------------------------
struct Arp {
    uint16_t oper = 0;  // 1 request, 2 reply
    MacAddr sha, tha;
    uint32_t spa = 0, tpa = 0;
};
inline constexpr uint16_t kArpRequest = 1, kArpReply = 2;
inline constexpr size_t kArpFrameLen = 42;  // before Ethernet's minimum-size padding

// `l2` gives addresses and an optional tag; ethertype is set to ARP.
size_t encode_arp(const L2& l2, const Arp& arp, std::span<uint8_t> out);
bool parse_arp(std::span<const uint8_t> frame, L2& l2, Arp& out);
// The reply to `request` from the owner of (`mac`, `ip`), addressed to the requester.
inline Arp arp_reply(const Arp& request, const MacAddr& mac, uint32_t ip) {
    Arp r;
    r.oper = kArpReply;
    r.sha = mac;
    r.spa = ip;
    r.tha = request.sha;
    r.tpa = request.spa;
    return r;
}

// --- PFC (IEEE 802.1Qbb) ------------------------------------------------------
inline constexpr MacAddr kPfcDstMac{{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01}};
inline constexpr uint16_t kPfcOpcode = 0x0101;
inline constexpr uint16_t kPauseOpcode = 0x0001;  // 802.3x link-level PAUSE
inline constexpr size_t kPfcFrameLen = 60;

struct Pfc {
    MacAddr src;
    uint8_t class_enable = 0;  // bit i: priority i
    std::array<uint16_t, 8> quanta{};  // pause time per priority, 512 bit times each; 0 resumes
};

size_t encode_pfc(const Pfc& pfc, std::span<uint8_t> out);
// True for a well-formed PFC frame (untagged, as 802.1Qbb requires).
bool parse_pfc(std::span<const uint8_t> frame, Pfc& out);

// What a frame is, decided from its first headers only.
enum class FrameKind : uint8_t { Truncated, Roce, Arp, Pfc, Pause, Ipv4Other, Ipv6Other, Other };
FrameKind classify(std::span<const uint8_t> frame);
const char* to_string(FrameKind k);

}  // namespace rocemu::wire
