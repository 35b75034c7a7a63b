// Every bit the ICRC covers is protected, except the masked (variant) fields.
#include <gtest/gtest.h>

#include <set>

#include "dataplane/wire/packet.hpp"
#include "tests/unit/wire/capture_files.hpp"

namespace rocemu::wire {
namespace {

// Offset (from the IP header) of each byte rxe masks with ones before the CRC.
bool masked_v4(size_t off_from_ip, size_t bth_rel) {
    return off_from_ip == 1 || off_from_ip == 8 || off_from_ip == 10 || off_from_ip == 11  // TOS, TTL, checksum
           || off_from_ip == 26 || off_from_ip == 27                                       // UDP checksum
           || off_from_ip == bth_rel + 4;                                                  // FECN/BECN/resv
}

TEST(BitFlip, AnyFlipInCoveredBytesFailsExceptMaskedFields) {
    // One frame of each distinct opcode keeps the run short but covers every header kind.
    std::set<uint8_t> done;
    size_t frames_tried = 0;
    for (const auto& f : test::captured_roce_frames()) {
        RocePacket p;
        ASSERT_EQ(parse_roce(f.bytes, p), ParseError::Ok);
        if (!done.insert(p.bth.opcode).second) continue;
        ++frames_tried;
        const size_t bth_rel = p.bth_off - p.l3_off;
        const size_t end = p.frame_len - 4;
        for (size_t byte = p.l3_off; byte < end; ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                std::vector<uint8_t> b = f.bytes;
                b[byte] ^= static_cast<uint8_t>(1 << bit);
                RocePacket q;
                const ParseError e = parse_roce(b, q);
                if (masked_v4(byte - p.l3_off, bth_rel)) {
                    // The IPv4 checksum guards TOS/TTL/checksum bytes, so the IP layer may reject them;
                    // the ICRC itself must not.
                    EXPECT_NE(e, ParseError::BadIcrc) << f.file << " byte " << byte << " bit " << bit;
                } else {
                    EXPECT_NE(e, ParseError::Ok) << f.file << " byte " << byte << " bit " << bit;
                }
            }
        }
        // Flips of the ICRC bytes themselves fail too.
        for (size_t byte = end; byte < p.frame_len; ++byte) {
            std::vector<uint8_t> b = f.bytes;
            b[byte] ^= 0x10;
            RocePacket q;
            EXPECT_EQ(parse_roce(b, q), ParseError::BadIcrc);
        }
    }
    EXPECT_GE(frames_tried, 10u);
}

TEST(BitFlip, MaskedFieldChangesKeepTheIcrcValid) {
    // Rewriting masked fields the way a switch does (ECN CE, TTL, BECN) keeps the ICRC valid.
    for (const auto& f : test::captured_roce_frames()) {
        RocePacket p;
        ASSERT_EQ(parse_roce(f.bytes, p), ParseError::Ok);
        std::vector<uint8_t> b = f.bytes;
        uint8_t* ip = b.data() + p.l3_off;
        ip[8] = 17;                            // TTL
        b[p.bth_off + 4] |= 0xC0;              // FECN and BECN
        b[p.l3_off + 26] = 0x12;               // UDP checksum
        b[p.l3_off + 27] = 0x34;
        // TOS with CE, and a correct IP header checksum so the IP layer accepts it.
        ip[1] = static_cast<uint8_t>(ip[1] | 3);
        ip[10] = ip[11] = 0;
        const uint16_t c = ip_checksum(ip, 20);
        ip[10] = static_cast<uint8_t>(c >> 8);
        ip[11] = static_cast<uint8_t>(c);
        RocePacket q;
        ASSERT_EQ(parse_roce(b, q), ParseError::Ok) << f.file;
        EXPECT_EQ(q.l3.ecn, ecn::kCe);
        EXPECT_TRUE(q.bth.becn);
    }
}

}  // namespace
}  // namespace rocemu::wire
