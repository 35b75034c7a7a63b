// Frames received as chains of segments (Engine::on_frame_chain), as a NIC
// gets them from a sender that sends payload straight from its MR: the same
// scenario run with every frame flat and with every frame cut at awkward
// places must leave the same bytes in memory, the same completions and the
// same counters. A corrupted frame is dropped for its ICRC either way, and
// headers cut across segments are a counted drop.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {
namespace {

constexpr size_t kMem = 64 << 10;

// Where a frame's payload starts and ends, and its length up to the ICRC.
struct Layout {
    size_t payload_off = 0, payload_end = 0, frame_len = 0;
};
Layout layout_of(std::span<const uint8_t> f) {
    wire::RocePacket p;
    EXPECT_EQ(wire::parse_roce(f, p, {.verify_icrc = false}), wire::ParseError::Ok);
    const size_t off = p.bth_off + p.info().hdr_len;
    return {off, off + p.payload_len, p.frame_len};
}

struct Outcome {
    std::vector<uint8_t> mem[2];
    std::vector<Wc> wcs[2];
    Counters counters[2];
};

// RC WRITE (several packets, odd length so the last carries pad), WRITE
// with immediate, SEND into a posted RECV, READ; or a UD SEND with
// immediate. Frame `corrupt_index` (if any) arrives with a flipped byte.
// `spray`: the RC QPs spray over 4 paths, and frames arrive out of order.
Outcome run(const std::function<std::vector<size_t>(std::span<const uint8_t>)>& cuts, bool ud,
            uint64_t corrupt_index = ~0ull, uint32_t zero_copy_min = 0,
            std::vector<std::vector<uint8_t>>* wire0 = nullptr, bool spray = false) {
    EngineConfig cfg;
    cfg.zero_copy_min = zero_copy_min;
    Loop L(cfg);
    L.cuts = cuts;
    L.keep_log = wire0 != nullptr;
    L.filter = [&](int, const wire::RocePacket&, uint64_t i) {
        Delivery d;
        d.corrupt = i == corrupt_index;
        // Under the reorder window and the SACK delay: reordered, not lost.
        if (spray) d.extra = Nanos{2000 * static_cast<int64_t>(3 - i % 4)};
        return d;
    };
    Side s[2];
    Outcome o;
    MrHandle mr[2];
    QpInitAttr t;
    if (ud) t.qp_type = QpType::Ud;
    if (spray) {
        t.reliability = Reliability::Spray;
        t.spray_paths = 4;
        t.reorder_window = 64;
    }
    // The same memory every run, so that frames carrying addresses compare.
    static std::vector<uint8_t> arena[2] = {std::vector<uint8_t>(kMem), std::vector<uint8_t>(kMem)};
    for (int i = 0; i < 2; ++i) {
        s[i] = make_side(L[i], t);
        for (size_t k = 0; k < kMem; ++k) arena[i][k] = static_cast<uint8_t>(i * 101 + k * 7 + k / 251);
        mr[i] = L[i].reg_mr(s[i].pd, arena[i].data(), kMem, kLocalWrite | kRemoteWrite | kRemoteRead).value;
    }
    connect(L, s);
    auto at = [&](int side, size_t off) { return arena[side].data() + off; };
    auto post = [&](const SendWr& w) { EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0])); };
    auto recv = [&](uint64_t id, size_t off, uint32_t len) {
        EXPECT_FALSE(L[1].post_recv(s[1].qpn, std::array{make_recv(id, at(1, off), len, mr[1].lkey)}, L.fx[1]));
    };
    size_t sends = 0;
    if (ud) {
        AddressVector av;
        av.dgid = ip_of(1);
        av.dmac = mac_of(1);
        recv(9, 0, 40 + 509);
        SendWr w = make_wr(1, WrOpcode::SendWithImm, at(0, 100), 509, mr[0].lkey);
        w.ah = L[0].create_ah(s[0].pd, av).value;
        w.remote_qpn = s[1].qpn;
        w.remote_qkey = 0x1234;
        w.imm_data = 42;
        post(w);
        sends = 1;
    } else {
        auto rdma = [&](uint64_t id, WrOpcode op, size_t loff, uint32_t len, size_t roff) {
            SendWr w = make_wr(id, op, at(0, loff), len, mr[0].lkey);
            w.remote_addr = reinterpret_cast<uint64_t>(at(1, roff));
            w.rkey = mr[1].rkey;
            return w;
        };
        recv(7, 30000, 100);  // the WRITE with immediate's
        recv(8, 20000, 4000);
        post(rdma(1, WrOpcode::RdmaWrite, 3, 5001, 9));
        SendWr imm = rdma(2, WrOpcode::RdmaWriteWithImm, 6000, 1030, 11000);
        imm.imm_data = 5;
        post(imm);
        post(make_wr(3, WrOpcode::Send, at(0, 13000), 3001, mr[0].lkey));
        post(rdma(4, WrOpcode::RdmaRead, 40001, 4099, 50003));
        sends = 4;
    }
    L.run([&] {
        auto more = drain(L[0], s[0].scq);
        o.wcs[0].insert(o.wcs[0].end(), more.begin(), more.end());
        return o.wcs[0].size() >= sends;
    });
    L.settle();
    o.wcs[1] = drain(L[1], s[1].rcq);
    for (int i = 0; i < 2; ++i) o.counters[i] = L[i].counters();
    if (wire0) *wire0 = L.sent[0];
    for (int i = 0; i < 2; ++i) o.mem[i] = arena[i];
    return o;
}

void expect_same(const Outcome& flat, const Outcome& chained) {
    for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(flat.mem[i] == chained.mem[i]) << "side " << i << " memory";
        ASSERT_EQ(flat.wcs[i].size(), chained.wcs[i].size()) << "side " << i;
        for (size_t k = 0; k < flat.wcs[i].size(); ++k) {
            EXPECT_EQ(flat.wcs[i][k].wr_id, chained.wcs[i][k].wr_id);
            EXPECT_EQ(flat.wcs[i][k].status, chained.wcs[i][k].status);
            EXPECT_EQ(flat.wcs[i][k].opcode, chained.wcs[i][k].opcode);
            EXPECT_EQ(flat.wcs[i][k].byte_len, chained.wcs[i][k].byte_len);
            EXPECT_EQ(flat.wcs[i][k].imm_data, chained.wcs[i][k].imm_data);
        }
        EXPECT_EQ(flat.counters[i].rcvd_pkts, chained.counters[i].rcvd_pkts);
        EXPECT_EQ(flat.counters[i].sent_pkts, chained.counters[i].sent_pkts);
        EXPECT_TRUE(flat.counters[i].drops == chained.counters[i].drops) << "side " << i << " drops";
    }
}

// The cut strategies: inside the payload (an odd place), payload | pad |
// ICRC each in their own segment, and every byte after the headers in a
// segment of its own.
std::vector<size_t> inside_payload(std::span<const uint8_t> f) {
    const Layout l = layout_of(f);
    if (l.payload_end == l.payload_off) return {l.payload_off + 1};  // an ACK: the ICRC apart, split
    return {l.payload_off + (l.payload_end - l.payload_off) / 2 + 1};
}
std::vector<size_t> own_segments(std::span<const uint8_t> f) {
    const Layout l = layout_of(f);
    std::vector<size_t> c{l.payload_off};
    if (l.payload_end > l.payload_off) c.push_back(l.payload_end);
    if (l.frame_len - 4 > l.payload_end) c.push_back(l.frame_len - 4);
    return c;
}
std::vector<size_t> one_byte(std::span<const uint8_t> f) {
    const Layout l = layout_of(f);
    std::vector<size_t> c;
    for (size_t i = l.payload_off; i < f.size(); ++i) c.push_back(i);
    return c;
}

TEST(TransportChain, RcFramesCutInsideThePayloadActAsFlatOnes) {
    const Outcome flat = run(nullptr, false);
    ASSERT_EQ(flat.wcs[0].size(), 4u);
    for (const Wc& w : flat.wcs[0]) EXPECT_EQ(w.status, WcStatus::Success);
    ASSERT_EQ(flat.wcs[1].size(), 2u);
    EXPECT_EQ(flat.wcs[1][1].byte_len, 3001u);
    EXPECT_TRUE(std::equal(flat.mem[0].begin() + 3, flat.mem[0].begin() + 3 + 5001, flat.mem[1].begin() + 9));
    EXPECT_TRUE(std::equal(flat.mem[1].begin() + 50003, flat.mem[1].begin() + 50003 + 4099, flat.mem[0].begin() + 40001));
    expect_same(flat, run(inside_payload, false));
}

TEST(TransportChain, RcPayloadPadAndIcrcInTheirOwnSegmentsActAsFlat) {
    expect_same(run(nullptr, false), run(own_segments, false));
}

TEST(TransportChain, RcOneByteSegmentsActAsFlat) { expect_same(run(nullptr, false), run(one_byte, false)); }

TEST(TransportChain, UdChainsActAsFlat) {
    const Outcome flat = run(nullptr, true);
    ASSERT_EQ(flat.wcs[1].size(), 1u);
    EXPECT_EQ(flat.wcs[1][0].byte_len, 40u + 509u);
    for (auto* cut : {inside_payload, own_segments, one_byte}) expect_same(flat, run(cut, true));
}

TEST(TransportChain, SprayedChainsActAsFlat) {
    const Outcome in_order = run(nullptr, false);
    for (const uint32_t zc : {0u, 1024u}) {
        const Outcome flat = run(nullptr, false, ~0ull, zc, nullptr, true);
        ASSERT_EQ(flat.wcs[0].size(), 4u);
        for (const Wc& w : flat.wcs[0]) EXPECT_EQ(w.status, WcStatus::Success);
        EXPECT_GT(flat.counters[1].out_of_seq_request, 0u);  // out of order indeed
        EXPECT_TRUE(flat.mem[1] == in_order.mem[1]);
        EXPECT_TRUE(flat.mem[0] == in_order.mem[0]);
        for (auto* cut : {inside_payload, own_segments, one_byte})
            expect_same(flat, run(cut, false, ~0ull, zc, nullptr, true));
    }
}

TEST(TransportChain, ABadIcrcInAChainIsStillDropped) {
    // Frame 2 is a middle packet of the first WRITE (placed while checked),
    // frame 7 the SEND's first.
    for (const uint64_t bad : {2ull, 7ull}) {
        const Outcome flat = run(nullptr, false, bad);
        const auto icrc = static_cast<size_t>(DropReason::BadIcrc);
        EXPECT_EQ(flat.counters[0].drops[icrc] + flat.counters[1].drops[icrc], 1u) << bad;
        for (auto* cut : {inside_payload, own_segments, one_byte}) expect_same(flat, run(cut, false, bad));
    }
}

TEST(TransportChain, HeadersCutAcrossSegmentsAreACountedDrop) {
    Loop L;
    L.cuts = [](std::span<const uint8_t> f) { return std::vector<size_t>{layout_of(f).payload_off - 1}; };
    Side s[2];
    std::vector<uint8_t> mem(8192, 1);
    for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
    const MrHandle mr = L[0].reg_mr(s[0].pd, mem.data(), mem.size(), kLocalWrite).value;
    connect(L, s, {.timeout = 1, .retry_cnt = 1});
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{make_wr(1, WrOpcode::Send, mem.data(), 2000, mr.lkey)}, L.fx[0]));
    L.settle(Nanos::from_s(1));
    const Counters& c = L[1].counters();
    EXPECT_EQ(c.rcvd_pkts, 0u);
    EXPECT_GE(c.drops[static_cast<size_t>(DropReason::SplitHeaders)], 2u);
    EXPECT_EQ(c.drops[static_cast<size_t>(DropReason::SplitHeaders)], L[0].counters().sent_pkts);
    EXPECT_EQ(c.drops[static_cast<size_t>(DropReason::ParseError)], 0u);
}

// Zero copy on the sender (payload of 1 KiB or more lent from the MR, pad
// and ICRC apart) puts the same bytes on the wire as copying does, and the
// receiver ends the same, whether it gets the frames flat or as chains.
TEST(TransportZeroCopy, FramesFromMrPagesAreTheCopiedFramesByteForByte) {
    std::vector<std::vector<uint8_t>> copied, lent;
    const Outcome flat = run(nullptr, false, ~0ull, 0, &copied);
    const Outcome zc = run(nullptr, false, ~0ull, 1024, &lent);
    ASSERT_EQ(copied.size(), lent.size());
    for (size_t i = 0; i < copied.size(); ++i) EXPECT_TRUE(copied[i] == lent[i]) << "frame " << i;
    expect_same(flat, zc);
    expect_same(flat, run(own_segments, false, ~0ull, 1024));
    // A corrupted lent frame is retransmitted from the MR again.
    expect_same(run(nullptr, false, 2), run(nullptr, false, 2, 1024));
}

// Two engines lending payload of 1024 bytes or more, connected, with a
// WRITE of `len` bytes (by default 3000: 1024 + 1024 + 952) posted on side 0.
struct PostedZeroCopyWrite {
    static EngineConfig config() {
        EngineConfig c;
        c.zero_copy_min = 1024;
        return c;
    }
    Loop L{config()};
    Side s[2];
    std::vector<uint8_t> mem, far = std::vector<uint8_t>(8 << 10);
    MrHandle mr;

    explicit PostedZeroCopyWrite(const QpInitAttr& t = {}, uint32_t len = 3000, const ConnectOpts& o = {})
        : mem(std::max<uint32_t>(len, 3 << 10), 7) {
        for (int i = 0; i < 2; ++i) s[i] = make_side(L[i], t);
        mr = L[0].reg_mr(s[0].pd, mem.data(), mem.size(), kLocalWrite).value;
        const MrHandle dst = L[1].reg_mr(s[1].pd, far.data(), far.size(), kLocalWrite | kRemoteWrite).value;
        connect(L, s, o);
        SendWr w = make_wr(1, WrOpcode::RdmaWrite, mem.data(), len, mr.lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(far.data());
        w.rkey = dst.rkey;
        EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    }
};

TEST(TransportZeroCopy, AnMrWithFramesInFlightCannotBeDeregistered) {
    PostedZeroCopyWrite z;
    Loop& L = z.L;
    const std::vector<uint8_t>& mem = z.mem;
    const MrHandle mr = z.mr;
    std::vector<std::vector<uint8_t>> bufs(4, std::vector<uint8_t>(Engine::kMinTxBuf));
    TxFrame fr[4];
    for (int i = 0; i < 4; ++i) fr[i].buf = bufs[i];
    ASSERT_EQ(L[0].tx_burst(fr, L.now, L.fx[0]), 3u);
    ASSERT_TRUE(fr[0].ext && fr[1].ext);
    EXPECT_FALSE(fr[2].ext);  // 952 bytes: below the threshold, copied
    EXPECT_EQ(fr[0].ext, mem.data());
    EXPECT_EQ(fr[1].ext, mem.data() + 1024);
    EXPECT_EQ(fr[0].pin, fr[1].pin);
    EXPECT_EQ(fr[0].pin->load(), 2u);
    EXPECT_EQ(fr[0].tail_len, 4);
    const VerbsError busy = L[0].dereg_mr(mr);
    EXPECT_EQ(busy.err, EBUSY);
    EXPECT_EQ(busy.msg, "MR has 2 zero-copy frames in flight that read its memory");
    fr[0].pin->fetch_sub(1);
    EXPECT_EQ(L[0].dereg_mr(mr).err, EBUSY);
    fr[1].pin->fetch_sub(1);
    EXPECT_FALSE(L[0].dereg_mr(mr));
}

TEST(TransportZeroCopy, AThresholdBelowTheFusedCopyIsRefused) {
    EngineConfig cfg;
    cfg.gids = {ip_of(0)};
    cfg.zero_copy_min = 256;
    VerbsError e;
    EXPECT_EQ(Engine::create(cfg, e), nullptr);
    EXPECT_STREQ(e.attr, "zero_copy_min");
}


TEST(TransportZeroCopy, InlineDataIsNeverLent) {
    EngineConfig cfg;
    cfg.zero_copy_min = 1024;
    Loop L(cfg);
    Side s[2];
    QpInitAttr t;
    t.cap.max_inline_data = 2048;
    std::vector<uint8_t> mem(4096, 7);
    for (int i = 0; i < 2; ++i) s[i] = make_side(L[i], t);
    const MrHandle mr = L[0].reg_mr(s[0].pd, mem.data(), mem.size(), kLocalWrite).value;
    connect(L, s);
    SendWr w = make_wr(1, WrOpcode::Send, mem.data(), 2000, mr.lkey);
    w.send_flags |= kSendInline;
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    std::vector<std::vector<uint8_t>> bufs(2, std::vector<uint8_t>(Engine::kMinTxBuf));
    TxFrame fr[2];
    for (int i = 0; i < 2; ++i) fr[i].buf = bufs[i];
    ASSERT_GE(L[0].tx_burst(fr, L.now, L.fx[0]), 1u);
    // Lent inline data would point into the QP's inline_buf, which destroy_qp
    // frees and the slot's next WQE overwrites while the frame is in flight.
    EXPECT_EQ(fr[0].ext, nullptr);
    EXPECT_GT(fr[0].len, 1024u);  // the payload is in the frame
    // The same SEND, not inline, is lent: the condition is inline, not size.
    w.send_flags &= ~kSendInline;
    w.wr_id = 2;
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    bool lent = false;
    for (int k = 0; k < 4 && !lent; ++k) {
        const uint32_t n = L[0].tx_burst(fr, L.now, L.fx[0]);
        for (uint32_t i = 0; i < n; ++i)
            if (fr[i].ext) {
                lent = fr[i].ext >= mem.data() && fr[i].ext < mem.data() + mem.size();
                fr[i].pin->fetch_sub(1);
            }
    }
    EXPECT_TRUE(lent);
}


TEST(TransportChain, RethCutAcrossSegmentsIsACountedDrop) {
    Loop L;
    L.cuts = [](std::span<const uint8_t> f) { return std::vector<size_t>{layout_of(f).payload_off - 1}; };
    Side s[2];
    std::vector<uint8_t> mem(8192, 1), far(8192);
    for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
    const MrHandle mr = L[0].reg_mr(s[0].pd, mem.data(), mem.size(), kLocalWrite).value;
    const MrHandle dst = L[1].reg_mr(s[1].pd, far.data(), far.size(), kLocalWrite | kRemoteWrite).value;
    connect(L, s, {.timeout = 1, .retry_cnt = 1});
    SendWr w = make_wr(1, WrOpcode::RdmaWrite, mem.data(), 900, mr.lkey);
    w.remote_addr = reinterpret_cast<uint64_t>(far.data());
    w.rkey = dst.rkey;
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    L.settle(Nanos::from_s(1));
    const Counters& c = L[1].counters();
    EXPECT_EQ(c.rcvd_pkts, 0u);
    EXPECT_EQ(c.drops[static_cast<size_t>(DropReason::SplitHeaders)], L[0].counters().sent_pkts);
}


TEST(TransportZeroCopy, DeregBetweenPacketsOfAWqeFailsTheRest) {
    PostedZeroCopyWrite z;
    Loop& L = z.L;
    const MrHandle mr = z.mr;
    std::vector<uint8_t> b0(Engine::kMinTxBuf), b1(Engine::kMinTxBuf);
    TxFrame f0, f1;
    f0.buf = b0;
    f1.buf = b1;
    ASSERT_EQ(L[0].tx_burst(std::span(&f0, 1), L.now, L.fx[0]), 1u);
    ASSERT_TRUE(f0.ext);
    f0.pin->fetch_sub(1);  // the first frame has left
    // Nothing pins the MR between packets, so dereg_mr succeeds (as in rxe)...
    ASSERT_FALSE(L[0].dereg_mr(mr));
    // ...and the packets still to send fail the WQE instead of lending its bytes.
    EXPECT_EQ(L[0].tx_burst(std::span(&f1, 1), L.now, L.fx[0]), 0u);
    EXPECT_EQ(f1.ext, nullptr);
    const std::vector<Wc> wcs = drain(L[0], z.s[0].scq);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].wr_id, 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::LocProtErr);
}

// A sprayed WRITE whose MR is deregistered after every packet has left, one
// of them lost: the selective retransmission must not read (or lend) the
// freed memory. The lost PSN stays unsent and the WQE fails with LocProtErr
// when the timeout's go-back-N reaches it, as the in-order path does.
TEST(TransportZeroCopy, SelectiveRetransmitAfterDeregFailsInsteadOfReading) {
    QpInitAttr t;
    t.reliability = Reliability::Spray;
    t.spray_paths = 4;
    t.reorder_window = 64;
    PostedZeroCopyWrite z(t, 4096, {.timeout = 12});
    Loop& L = z.L;
    const Side* s = z.s;
    // The WRITE's third packet (PSN 102) is lost the first time; a second
    // copy of it would show up here.
    uint32_t psn2_sent = 0;
    L.filter = [&](int from, const wire::RocePacket& p, uint64_t) {
        Delivery d;
        if (from == 0 && p.bth.psn == Psn{102}) d.drop = ++psn2_sent == 1;
        return d;
    };
    bool lent_after_dereg = false, deregistered = false;
    L.tx_hook = [&](int side, std::span<const TxFrame> frames) {
        for (const TxFrame& f : frames)
            lent_after_dereg |= side == 0 && deregistered && f.ext != nullptr;
    };
    L.pump();  // all four packets leave, each lent from the MR and released
    ASSERT_EQ(L[0].qp_counters(s[0].qpn)->sent_pkts, 4u);
    ASSERT_EQ(psn2_sent, 1u);
    ASSERT_FALSE(L[0].dereg_mr(z.mr));  // nothing pins it between packets
    deregistered = true;
    std::vector<Wc> wcs;
    L.run([&] {
        auto m = drain(L[0], s[0].scq);
        wcs.insert(wcs.end(), m.begin(), m.end());
        return !wcs.empty();
    });
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].wr_id, 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::LocProtErr);
    EXPECT_EQ(psn2_sent, 1u);
    EXPECT_FALSE(lent_after_dereg);
    const Counters& c = *L[0].qp_counters(s[0].qpn);
    EXPECT_EQ(c.sent_pkts, 4u);
    EXPECT_EQ(c.selective_retransmits, 0u);
}

}  // namespace
}  // namespace rocemu::transport::test
