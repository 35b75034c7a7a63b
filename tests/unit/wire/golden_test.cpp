// Golden vectors: real Linux rxe traffic from ../shared/captures.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/packet.hpp"
#include "tests/unit/wire/capture_files.hpp"

namespace rocemu::wire {
namespace {

TEST(Golden, CapturesArePresent) {
    const auto files = test::capture_files();
    EXPECT_GE(files.size(), 8u) << "expected the rxe captures in " << ROCEMU_CAPTURES_DIR;
}

TEST(Golden, EveryRocePacketParsesAndIcrcMatches) {
    const auto frames = test::captured_roce_frames();
    ASSERT_GT(frames.size(), 100u);
    for (const auto& f : frames) {
        RocePacket p;
        ASSERT_EQ(parse_roce(f.bytes, p), ParseError::Ok) << f.file;
        const uint32_t recomputed = compute_icrc(f.bytes.data() + p.l3_off, p.frame_len - 4 - p.l3_off, p.l3.v6);
        EXPECT_EQ(recomputed, p.icrc) << f.file << " psn " << p.bth.psn.value();
    }
}

TEST(Golden, ReencodingReproducesEveryFrameByteForByte) {
    for (const auto& f : test::captured_roce_frames()) {
        RocePacket p;
        ASSERT_EQ(parse_roce(f.bytes, p), ParseError::Ok);
        std::vector<uint8_t> out(f.bytes.size() + 64);
        const size_t n = encode_roce(p, out);
        ASSERT_EQ(n, p.frame_len) << f.file;
        EXPECT_TRUE(std::equal(out.begin(), out.begin() + n, f.bytes.begin())) << f.file << " psn " << p.bth.psn.value();
        // Anything after the ICRC is Ethernet minimum-size padding.
        for (size_t i = n; i < f.bytes.size(); ++i) EXPECT_EQ(f.bytes[i], 0) << f.file;
    }
}

TEST(Golden, CapturesCoverTheExpectedOpcodesAndHeaders) {
    std::set<std::string> seen;
    std::map<std::string, std::set<uint32_t>> payload_sizes;
    for (const auto& f : test::captured_roce_frames()) {
        RocePacket p;
        ASSERT_EQ(parse_roce(f.bytes, p), ParseError::Ok);
        seen.insert(p.info().name);
        payload_sizes[p.info().name].insert(p.payload_len);
    }
    for (const char* name : {"RC_SEND_ONLY", "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_RDMA_WRITE_ONLY",
                             "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST",
                             "RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_FIRST", "RC_RDMA_READ_RESPONSE_MIDDLE",
                             "RC_RDMA_READ_RESPONSE_LAST", "RC_ACKNOWLEDGE", "RC_FETCH_ADD", "RC_ATOMIC_ACKNOWLEDGE",
                             "UD_SEND_ONLY"})
        EXPECT_TRUE(seen.count(name)) << name;
    EXPECT_TRUE(payload_sizes["RC_RDMA_WRITE_MIDDLE"].count(4096)) << "path MTU 4096 capture";
    EXPECT_TRUE(payload_sizes["RC_SEND_MIDDLE"].count(1024));
}

TEST(Golden, KnownFieldsOfTheFetchAddCapture) {
    for (const auto& f : test::captured_roce_frames()) {
        if (f.file.find("atomic") == std::string::npos) continue;
        RocePacket p;
        ASSERT_EQ(parse_roce(f.bytes, p), ParseError::Ok);
        if (p.bth.opcode == op::FETCH_ADD) {
            EXPECT_TRUE(p.bth.ackreq);
            EXPECT_EQ(p.payload_len, 0u);
            EXPECT_NE(p.atomic.rkey, 0u);
            EXPECT_EQ(p.atomic.va % 8, 0u);
        }
        if (p.bth.opcode == op::ATOMIC_ACKNOWLEDGE) {
            EXPECT_EQ(p.aeth.syndrome & aeth::kTypeMask, aeth::kAck);
        }
    }
}

}  // namespace
}  // namespace rocemu::wire
