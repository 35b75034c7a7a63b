// READ responses from MR pages (EngineConfig::zero_copy_min): the responder
// lends the MR's bytes of each READ RESPONSE of 1 KiB or more payload
// (TxFrame::ext, pinned on the MR) instead of copying them, with the ICRC
// computed over the MR's bytes; the frames on the wire are those of a
// copying responder byte for byte, and a READ retried after a lost response
// is answered from the MR again.
#include <array>
#include <cerrno>

#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {
namespace {

constexpr uint32_t kLen = 3000;  // READ RESPONSE FIRST 1024, MIDDLE 1024, LAST 952 at MTU 1024

bool is_read_response(uint8_t opcode) {
    return opcode >= wire::op::READ_RESPONSE_FIRST && opcode <= wire::op::READ_RESPONSE_ONLY;
}

// Side 0 READs kLen bytes of side 1's MR into its own; side 1 answers
// with `zero_copy_min`. `lose`: the responder's frame of that index is lost.
struct ReadRun {
    Loop L;
    Side s[2];
    std::vector<uint8_t> local = std::vector<uint8_t>(8 << 10, 0), remote = std::vector<uint8_t>(8 << 10);
    MrHandle mr[2];
    std::vector<const uint8_t*> lent;        // each lent response's payload address
    std::vector<uint32_t> pins_while_lent;   // the MR's pin count as each left
    std::vector<VerbsError> dereg_while_lent;
    std::vector<Wc> wcs;

    static EngineConfig config(uint32_t zero_copy_min) {
        EngineConfig c;
        c.zero_copy_min = zero_copy_min;
        return c;
    }
    explicit ReadRun(uint32_t zero_copy_min, uint64_t lose = ~0ull) : L(config(zero_copy_min)) {
        for (size_t k = 0; k < remote.size(); ++k) remote[k] = static_cast<uint8_t>(k * 7 + k / 251);
        for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
        mr[0] = L[0].reg_mr(s[0].pd, local.data(), local.size(), kLocalWrite).value;
        mr[1] = L[1].reg_mr(s[1].pd, remote.data(), remote.size(), kLocalWrite | kRemoteRead).value;
        connect(L, s);
        L.keep_log = true;
        L.tx_hook = [this](int side, std::span<const TxFrame> frames) {
            if (side != 1) return;
            for (const TxFrame& f : frames) {
                if (!f.ext) continue;
                lent.push_back(f.ext);
                pins_while_lent.push_back(f.pin->load());
                dereg_while_lent.push_back(L[1].dereg_mr(mr[1]));
            }
        };
        uint64_t responses = 0;
        L.filter = [&, lose](int from, const wire::RocePacket& p, uint64_t) {
            Delivery d;
            if (from == 1 && is_read_response(p.bth.opcode)) d.drop = responses++ == lose;
            return d;
        };
        SendWr w = make_wr(1, WrOpcode::RdmaRead, local.data() + 100, kLen, mr[0].lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(remote.data() + 40);
        w.rkey = mr[1].rkey;
        EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
        EXPECT_TRUE(L.run([&] {
            for (const Wc& wc : drain(L[0], s[0].scq)) wcs.push_back(wc);
            return !wcs.empty();
        }));
        L.filter = nullptr;
    }
    std::vector<std::vector<uint8_t>> responses() const {
        std::vector<std::vector<uint8_t>> out;
        for (const auto& f : L.sent[1]) {
            wire::RocePacket p;
            if (wire::parse_roce(f, p, {.verify_icrc = false}) == wire::ParseError::Ok && is_read_response(p.bth.opcode))
                out.push_back(f);
        }
        return out;
    }
    bool landed() const {
        return std::equal(remote.begin() + 40, remote.begin() + 40 + kLen, local.begin() + 100);
    }
};

TEST(TransportReadZeroCopy, AReadResponseLendsTheMrPagesAndPutsTheCopiedFramesBytesOnTheWire) {
    ReadRun copied(0), zc(1024);
    ASSERT_EQ(zc.wcs.size(), 1u);
    EXPECT_EQ(zc.wcs[0].status, WcStatus::Success);
    EXPECT_TRUE(zc.landed());
    // FIRST and MIDDLE (1024 bytes each) are lent where they lie in the MR;
    // LAST (952) is below the threshold and copied.
    ASSERT_EQ(zc.lent.size(), 2u);
    EXPECT_EQ(zc.lent[0], zc.remote.data() + 40);
    EXPECT_EQ(zc.lent[1], zc.remote.data() + 40 + 1024);
    EXPECT_TRUE(copied.lent.empty());
    // Byte for byte the copying responder's frames, ICRC over the MR's bytes included.
    const auto a = copied.responses(), b = zc.responses();
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), 3u);
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(a[i] == b[i]) << "response " << i;
        wire::RocePacket p;
        EXPECT_EQ(wire::parse_roce(b[i], p, {.verify_icrc = true}), wire::ParseError::Ok) << "response " << i;
    }
    for (const uint64_t d : zc.L[0].counters().drops) EXPECT_EQ(d, 0u);
}

// While a lent response is in flight its MR is pinned and cannot be
// deregistered; once the runtime has released every frame, it can.
TEST(TransportReadZeroCopy, TheMrOfAResponseInFlightIsPinned) {
    ReadRun zc(1024);
    ASSERT_EQ(zc.lent.size(), 2u);
    for (size_t i = 0; i < zc.lent.size(); ++i) {
        EXPECT_GE(zc.pins_while_lent[i], 1u);
        EXPECT_EQ(zc.dereg_while_lent[i].err, EBUSY);
    }
    EXPECT_FALSE(zc.L[1].dereg_mr(zc.mr[1]));
}

// A lost READ RESPONSE MIDDLE: the requester READs the rest again, and the
// responder answers the duplicate READ from the MR's pages again.
TEST(TransportReadZeroCopy, ARetriedReadIsAnsweredFromTheMrAgain) {
    ReadRun zc(1024, 1);
    ASSERT_EQ(zc.wcs.size(), 1u);
    EXPECT_EQ(zc.wcs[0].status, WcStatus::Success);
    EXPECT_TRUE(zc.landed());
    ASSERT_GE(zc.lent.size(), 3u) << "FIRST and MIDDLE, then MIDDLE again";
    EXPECT_EQ(zc.lent.back(), zc.remote.data() + 40 + 1024);
    EXPECT_GE(zc.L[1].counters().duplicate_request, 1u);
    for (const auto& f : zc.responses()) {
        wire::RocePacket p;
        EXPECT_EQ(wire::parse_roce(f, p, {.verify_icrc = true}), wire::ParseError::Ok);
    }
    EXPECT_FALSE(zc.L[1].dereg_mr(zc.mr[1]));
}

}  // namespace
}  // namespace rocemu::transport::test
