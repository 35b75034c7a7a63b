// Feeds arbitrary bytes to every frame parser. Beyond "no crash, no
// out-of-bounds read" (ASan), it checks that whatever parses as RoCEv2
// re-encodes to the same bytes, and that a frame given a fresh ICRC verifies.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"
#include "dataplane/wire/packet.hpp"

using namespace rocemu::wire;

// The encoder writes reserved fields and pad bytes as zero, so only frames
// that have them zero can re-encode byte for byte.
static bool reserved_clear(const uint8_t* f, const RocePacket& p) {
    // 0x0000 and 0xFFFF are both a valid IPv4 checksum when the rest sums to zero.
    if (!p.l3.v6 && f[p.l3_off + 10] == 0xFF && f[p.l3_off + 11] == 0xFF) return false;
    const uint8_t* bth = f + p.bth_off;
    if ((bth[4] & 0x3F) != 0 || (bth[8] & 0x7F) != 0) return false;
    const OpcodeInfo& info = p.info();
    if (info.has(Hdr::Deth) && bth[info.offset[static_cast<int>(Hdr::Deth)] + 4] != 0) return false;
    if (info.has(Hdr::CnpPad))
        for (int i = 0; i < 16; ++i)
            if (bth[info.offset[static_cast<int>(Hdr::CnpPad)] + i] != 0) return false;
    const uint8_t* pad = p.payload + p.payload_len;
    for (int i = 0; i < p.bth.pad; ++i)
        if (pad[i] != 0) return false;
    return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> frame(data, size);
    (void)classify(frame);
    {
        L2 l2;
        Arp arp;
        (void)parse_arp(frame, l2, arp);
        Pfc pfc;
        (void)parse_pfc(frame, pfc);
        (void)describe_other(frame);
    }
    RocePacket p;
    const ParseError e = parse_roce(frame, p);
    (void)describe_roce(p, e);
    if (e == ParseError::Ok) {
        std::vector<uint8_t> out(size + 64);
        const size_t n = encode_roce(p, out);
        if (reserved_clear(data, p) && (n != p.frame_len || std::memcmp(out.data(), data, n) != 0)) abort();
    }
    if (e == ParseError::BadIcrc || e == ParseError::Ok) {
        std::vector<uint8_t> copy(data, data + size);
        if (!refresh_icrc(copy)) abort();
        RocePacket q;
        if (parse_roce(copy, q) != ParseError::Ok) abort();
    }
    return 0;
}
