// A QP's frame headers built once and stamped per packet.
//
// Consecutive frames a QP sends to its peer agree on nearly every header
// byte: MACs, VLAN tag, IP version, addresses, TOS, TTL, flow label, UDP
// destination port, P_Key and destination QP. HeaderTemplate keeps those
// bytes (Ethernet to the end of the BTH) and writes a frame's headers as one
// copy plus the fields that change: IP length, ID and checksum (summed from
// the template's precomputed sum), UDP source port and length, the BTH's
// opcode, SE, PadCnt, FECN/BECN, AckReq and PSN, and the extended headers.
//
// It also hands the ICRC its start: the raw CRC state over the IP, UDP and
// BTH headers (variant fields masked). That span has a fixed length, so by
// CRC linearity it is the state of the template with its changing bytes set
// to zero, XORed with one table entry per changing byte, instead of a CRC
// call over 40 (IPv6: 60) bytes. The result is byte for byte what
// encode_roce_headers and the ICRC recipe produce for the same packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {

class HeaderTemplate {
public:
    // Ethernet + 802.1Q + IPv6 + UDP + BTH.
    static constexpr size_t kMaxLen = kMaxOuterLen + kBthLen;

    // Takes every field but the changing ones (listed above) from `p`.
    void build(const RocePacket& p);
    bool valid() const { return valid_; }
    void reset() { valid_ = false; }

    // Writes the headers of `p` as encode_roce_headers() would, the fields
    // that are not listed above taken from the template, not from `p`.
    // Sets lay.crc_off and lay.crc_state. False if `out` is too small or the
    // opcode is not valid.
    bool write(const RocePacket& p, std::span<uint8_t> out, EncodeLayout& lay) const;

private:
    alignas(64) uint8_t hdr_[kMaxLen] = {};
    uint8_t l3_off_ = 0;
    uint8_t len_ = 0;      // Ethernet to the end of the BTH
    uint8_t bth1_ = 0;     // BTH byte 1 without SE and PadCnt: MigReq, TVer
    bool v6_ = false;
    bool valid_ = false;
    uint32_t ip_sum_ = 0;  // IPv4: one's-complement sum of the header words that do not change
    uint32_t state_ = 0;   // raw ICRC state over IP..BTH, changing bytes zero
};

// The receive side of the same idea, for IPv4 frames: the raw ICRC state
// over the IP, UDP and BTH headers (40 bytes) worked out from the last frame
// this object saw, when the two differ only in the bytes a HeaderTemplate
// changes (plus the ones the ICRC masks); any other difference takes the
// full CRC. Frames of one QP in a row therefore cost a table lookup per
// changing byte instead of a copy, the masking and 40 bytes of CRC.
class RxIcrc {
public:
    static constexpr size_t kLen = 40;
    // Raw state over the first kLen bytes from the IP header.
    uint32_t state(const uint8_t* l3);
    // The ICRC of `len` bytes from the IP header (len >= kLen), as compute_icrc.
    uint32_t operator()(const uint8_t* l3, size_t len);

private:
    IcrcFollower<kLen> follow_;
};

}  // namespace rocemu::wire
