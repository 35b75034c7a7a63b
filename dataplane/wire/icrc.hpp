// The RoCEv2 invariant CRC, computed exactly as Linux rxe does (rxe_icrc.c):
// CRC-32 (reflected Ethernet polynomial) seeded with 0xDEBB20E3, the state
// after eight 0xFF bytes that stand for the masked LRH, over the IP header,
// UDP header and BTH with their variant fields set to all ones, then the rest
// of the transport headers, the payload and the pad; the result is inverted
// and carried little-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dataplane/wire/crc_tables.hpp"

namespace rocemu::wire {

// `l3` points at the IP header; `len` counts from there to the end of the
// pad (the ICRC itself excluded). `len` must cover at least IP+UDP+BTH.
uint32_t compute_icrc(const uint8_t* l3, size_t len, bool v6);

// The same value, for a frame the caller is building: the variant fields
// are set to all ones in place, the CRC runs in one pass over the buffer,
// and the fields are put back before returning. No copy, one CRC call.
uint32_t compute_icrc_in_place(uint8_t* l3, size_t len, bool v6);

// The raw CRC state after the eight masked LRH bytes: where rxe starts.
inline constexpr uint32_t kIcrcSeed = 0xDEBB20E3u;

// Offsets from an IPv4 header of the bytes the ICRC sees as all ones: TOS,
// TTL, IP checksum, UDP checksum, the BTH byte with FECN/BECN.
inline constexpr std::array<uint8_t, 7> kIcrcMaskedIpv4 = {1, 8, 10, 11, 26, 27, 32};

// The ICRC in pieces, for a frame whose payload is CRCed while it is copied
// in: the raw state (crc32.hpp) after the first `len` bytes from the IP
// header, variant fields masked; `len` covers IP+UDP+BTH at least and is at
// most 256. Continue with crc32_update/crc32_copy; the ICRC is the inverse
// of the final state.
uint32_t icrc_begin(const uint8_t* l3, size_t len, bool v6);

// The raw ICRC state over the first Len bytes from an IPv4 header, worked
// out from the last frame this object saw. When the two agree wherever
// `fixed` is 0xFF they differ only at the `varying` offsets, and the CRC is
// linear, so each of those bytes changes the last state by a table lookup,
// where a CRC call costs about as much as 200 bytes of CRC. Any other
// difference (another peer, a corrupted byte) takes the full CRC, and the
// result is always the frame's own state.
template <size_t Len>
class IcrcFollower {
public:
    template <size_t N>
    uint32_t state(const uint8_t* l3, const std::array<uint8_t, Len>& fixed, const std::array<uint8_t, N>& varying,
                   const std::array<crc_tables::Table, N>& tables) {
        if (valid_ && crc_tables::agree(l3, last_, fixed)) {
            state_ = crc_tables::update(state_, l3, last_, varying, tables);
        } else {
            state_ = icrc_begin(l3, Len, false);
            valid_ = true;
        }
        std::memcpy(last_, l3, Len);
        return state_;
    }

private:
    uint8_t last_[Len] = {};
    uint32_t state_ = 0;
    bool valid_ = false;
};

// The ICRC of a received IPv4 ACKNOWLEDGE (44 bytes from the IP header to
// the ICRC). ACKs in a row differ only in the IP ID, the UDP source port,
// the destination QP, the PSN and the AETH. (A sent ACK needs none of this:
// its header template hands over the state up to the AETH.)
class AckIcrc {
public:
    static constexpr size_t kLen = 44;
    uint32_t operator()(const uint8_t* l3);

private:
    IcrcFollower<kLen> follow_;
};

}  // namespace rocemu::wire
