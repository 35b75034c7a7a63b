// Null MRs (Engine::alloc_null_mr, as ibv_alloc_null_mr): a source of zeros
// that is never read. The frames are those of a zeroed region byte for byte;
// a caller may take the zeroing of the payload on itself (TxFrame::
// defer_zeros); a receiver told that a payload is zero (on_frame's
// zero_from) computes its ICRC share without reading it. The virtual-time
// fabric's RC NICs use all three, and discard MRs (Engine::alloc_discard_mr)
// as their sinks.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <vector>

#include "tests/unit/transport/harness.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::transport::test {
namespace {

constexpr size_t kMem = 16 << 10;

bool all_of_byte(std::span<const uint8_t> s, uint8_t v) {
    return std::ranges::all_of(s, [v](uint8_t b) { return b == v; });
}

struct Sent {
    std::vector<std::vector<uint8_t>> frames;  // side 0's, in order
    std::vector<uint8_t> far;                  // side 1's memory after the run
    std::vector<Wc> wcs[2];
};

// Side 0 sends, from `src` (zeroed memory, or a null MR over addresses that
// hold 0x77, which must not be read): a WRITE of 2999 bytes (3 packets, the last with pad), a SEND of
// three SGEs (zeros, 200 bytes of 0x3C from a real MR, zeros), a WRITE WITH
// IMMEDIATE of 600 bytes and a WRITE of 40 (below the fused copy). Side 1's
// memory starts as 0xAA, so every zero in it was written.
Sent run(bool null_mr) {
    Loop L;
    L.keep_log = true;
    Side s[2];
    for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
    static std::vector<uint8_t> zeros(kMem), junk(kMem, 0x77), ones(kMem, 0x3C), far(kMem);
    std::fill(far.begin(), far.end(), uint8_t{0xAA});
    const MrHandle src = null_mr ? L[0].alloc_null_mr(s[0].pd).value
                                 : L[0].reg_mr(s[0].pd, zeros.data(), kMem, kLocalWrite).value;
    const MrHandle real = L[0].reg_mr(s[0].pd, ones.data(), kMem, kLocalWrite).value;
    const MrHandle dst = L[1].reg_mr(s[1].pd, far.data(), kMem, kLocalWrite | kRemoteWrite).value;
    EXPECT_NE(src.lkey, 0u);
    uint8_t* const from = null_mr ? junk.data() : zeros.data();  // local addresses are not on the wire
    connect(L, s);
    auto write = [&](uint64_t id, WrOpcode op, uint32_t len, size_t at) {
        SendWr w = make_wr(id, op, from + at, len, src.lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(far.data() + at);
        w.rkey = dst.rkey;
        w.imm_data = 0x1234;
        EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    };
    write(1, WrOpcode::RdmaWrite, 2999, 0);
    EXPECT_FALSE(L[1].post_recv(s[1].qpn, std::array{make_recv(9, far.data() + 4096, 4096, dst.lkey)}, L.fx[1]));
    SendWr send = make_wr(2, WrOpcode::Send, from, 100, src.lkey);
    send.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(ones.data()), 200, real.lkey});
    send.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(from + 300), 1500, src.lkey});
    EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{send}, L.fx[0]));
    EXPECT_FALSE(L[1].post_recv(s[1].qpn, std::array{make_recv(10, far.data() + 8192, 4096, dst.lkey)}, L.fx[1]));
    write(3, WrOpcode::RdmaWriteWithImm, 600, 12288);
    write(4, WrOpcode::RdmaWrite, 40, 14000);
    L.settle();
    Sent r;
    r.frames = L.sent[0];
    r.far = far;
    for (int i = 0; i < 2; ++i) {
        r.wcs[i] = drain(L[i], s[i].scq);
        const auto rw = drain(L[i], s[i].rcq);
        r.wcs[i].insert(r.wcs[i].end(), rw.begin(), rw.end());
    }
    return r;
}

TEST(TransportNullMr, SendsTheFramesOfAZeroedRegionByteForByte) {
    const Sent zeroed = run(false), null = run(true);
    ASSERT_EQ(zeroed.frames.size(), 7u);  // 3 + 2 + 1 + 1
    ASSERT_EQ(null.frames.size(), zeroed.frames.size());
    for (size_t i = 0; i < zeroed.frames.size(); ++i) EXPECT_TRUE(null.frames[i] == zeroed.frames[i]) << "frame " << i;
    EXPECT_TRUE(null.far == zeroed.far);
    EXPECT_TRUE(all_of_byte(std::span(null.far).first(2999), 0));
    EXPECT_TRUE(all_of_byte(std::span(null.far).subspan(4096, 100), 0));
    EXPECT_TRUE(all_of_byte(std::span(null.far).subspan(4196, 200), 0x3C));
    EXPECT_TRUE(all_of_byte(std::span(null.far).subspan(4396, 1500), 0));
    EXPECT_TRUE(all_of_byte(std::span(null.far).subspan(4096 + 1800, 100), 0xAA));
    ASSERT_EQ(null.wcs[0].size(), 4u);
    ASSERT_EQ(null.wcs[1].size(), 2u);  // the SEND and the WRITE WITH IMMEDIATE
    for (int i = 0; i < 2; ++i)
        for (const Wc& wc : null.wcs[i]) EXPECT_EQ(wc.status, WcStatus::Success) << "side " << i << " wr " << wc.wr_id;
}

// The requester of a null-MR WRITE of `len` bytes, and frames pulled with
// buffers full of 0xEE. Every instance targets the same memory (set to 0xAA),
// so that frames of one carry the RETH of another.
struct Pulled {
    Loop L;
    Side s[2];
    static inline std::vector<uint8_t> far = std::vector<uint8_t>(kMem);
    std::vector<std::vector<uint8_t>> bufs = std::vector<std::vector<uint8_t>>(8);
    TxFrame fr[8];
    uint32_t n = 0;

    Pulled(uint32_t len, bool defer, bool null_mr = true) {
        std::fill(far.begin(), far.end(), uint8_t{0xAA});
        for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
        static std::vector<uint8_t> zeros(kMem);
        const MrHandle src = null_mr ? L[0].alloc_null_mr(s[0].pd).value
                                     : L[0].reg_mr(s[0].pd, zeros.data(), kMem, kLocalWrite).value;
        const MrHandle dst = L[1].reg_mr(s[1].pd, far.data(), kMem, kLocalWrite | kRemoteWrite).value;
        connect(L, s);
        SendWr w = make_wr(1, WrOpcode::RdmaWrite, zeros.data(), len, src.lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(far.data());
        w.rkey = dst.rkey;
        EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
        for (size_t i = 0; i < 8; ++i) {
            bufs[i].assign(Engine::kMinTxBuf, 0xEE);
            fr[i].buf = bufs[i];
            fr[i].defer_zeros = defer;
        }
        n = L[0].tx_burst(fr, L.now, L.fx[0]);
    }
    std::span<uint8_t> frame(uint32_t i) { return std::span(bufs[i]).first(fr[i].len); }
};

TEST(TransportNullMr, ZerosLeftToTheCallerAreCountedInTheIcrc) {
    Pulled deferred(2999, true), written(2999, false);
    ASSERT_EQ(deferred.n, 3u);
    ASSERT_EQ(written.n, 3u);
    constexpr uint16_t kFirst = 14 + 20 + 8 + 12 + 16, kMiddle = 14 + 20 + 8 + 12;  // RETH on the first only
    const uint16_t offs[3] = {kFirst, kMiddle, kMiddle};
    const uint16_t lens[3] = {1024, 1024, 951};
    for (uint32_t i = 0; i < 3; ++i) {
        TxFrame& f = deferred.fr[i];
        EXPECT_EQ(f.zeros_off, offs[i]) << i;
        EXPECT_EQ(f.zeros_len, lens[i]) << i;
        EXPECT_EQ(written.fr[i].zeros_len, 0u) << i;
        EXPECT_EQ(f.len, written.fr[i].len) << i;
        const auto b = deferred.frame(i);
        // Left as they were, but for the header template's zero tail.
        constexpr size_t kTemplate = wire::HeaderTemplate::kMaxLen;
        EXPECT_TRUE(all_of_byte(b.subspan(kTemplate, f.zeros_off + f.zeros_len - kTemplate), 0xEE))
            << "left unwritten, frame " << i;
        std::fill_n(b.begin() + f.zeros_off, f.zeros_len, uint8_t{0});
        const auto w = written.frame(i);
        EXPECT_TRUE(std::ranges::equal(b, w)) << "once zeroed, the written frame; frame " << i;
    }
    // Below the fused copy (512 bytes) the engine writes the zeros itself,
    // and a real MR's bytes are always written.
    Pulled small(300, true), real(2999, true, false);
    ASSERT_EQ(small.n, 1u);
    EXPECT_EQ(small.fr[0].zeros_len, 0u);
    EXPECT_TRUE(all_of_byte(small.frame(0).subspan(kFirst, 300), 0));
    ASSERT_EQ(real.n, 3u);
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(real.fr[i].zeros_len, 0u) << i;
}

TEST(TransportNullMr, AReceiverToldThePayloadIsZeroDoesNotReadIt) {
    // The frames of a 3072-byte WRITE (FIRST, MIDDLE, LAST) with garbage in
    // place of their zero payloads and their ICRCs left as they were.
    auto garbled = [] {
        Pulled p(3072, false);
        EXPECT_EQ(p.n, 3u);
        std::vector<std::vector<uint8_t>> out;
        const uint16_t offs[3] = {14 + 20 + 8 + 12 + 16, 14 + 20 + 8 + 12, 14 + 20 + 8 + 12};
        for (uint32_t i = 0; i < p.n; ++i) {
            const auto f = p.frame(i);
            std::fill_n(f.begin() + offs[i], 1024, uint8_t{0x5A});
            out.emplace_back(f.begin(), f.end());
        }
        return out;
    };
    const auto frames = garbled();
    const size_t zero_from[3] = {14 + 20 + 8 + 12 + 16, 14 + 20 + 8 + 12, 14 + 20 + 8 + 12};
    {
        // Told: the ICRCs pass without the payload being read, and the
        // memory gets zeros, not the garbage.
        Pulled r(3072, false);
        for (uint32_t i = 0; i < 3; ++i) r.L[1].on_frame(frames[i], r.L.now, r.L.fx[1], zero_from[i]);
        EXPECT_EQ(r.L[1].counters().drops[static_cast<size_t>(DropReason::BadIcrc)], 0u);
        EXPECT_TRUE(all_of_byte(std::span(r.far).first(3072), 0));
        EXPECT_TRUE(all_of_byte(std::span(r.far).subspan(3072, 64), 0xAA));
    }
    {
        // Not told: every byte is read, and the garbage fails the ICRC.
        Pulled r(3072, false);
        for (uint32_t i = 0; i < 3; ++i) r.L[1].on_frame(frames[i], r.L.now, r.L.fx[1]);
        EXPECT_EQ(r.L[1].counters().drops[static_cast<size_t>(DropReason::BadIcrc)], 3u);
        EXPECT_TRUE(all_of_byte(std::span(r.far).first(3072), 0xAA));
    }
    {
        // Told, but a header byte or the ICRC is wrong: still dropped.
        Pulled r(3072, false);
        std::vector<uint8_t> psn = frames[0], icrc = frames[0];
        psn[14 + 20 + 8 + 11] ^= 0x01;
        icrc.back() ^= 0x80;
        r.L[1].on_frame(psn, r.L.now, r.L.fx[1], zero_from[0]);
        r.L[1].on_frame(icrc, r.L.now, r.L.fx[1], zero_from[0]);
        EXPECT_EQ(r.L[1].counters().drops[static_cast<size_t>(DropReason::BadIcrc)], 2u);
        // Told from one byte too late: the payload's first byte is read.
        r.L[1].on_frame(frames[0], r.L.now, r.L.fx[1], zero_from[0] + 1);
        EXPECT_EQ(r.L[1].counters().drops[static_cast<size_t>(DropReason::BadIcrc)], 3u);
        EXPECT_TRUE(all_of_byte(std::span(r.far).first(3072), 0xAA));
    }
}

// Two connected engines, each with a null MR.
struct NullPair {
    Loop L;
    Side s[2];
    MrHandle null[2];
    NullPair() {
        for (int i = 0; i < 2; ++i) {
            s[i] = make_side(L[i]);
            null[i] = L[i].alloc_null_mr(s[i].pd).value;
        }
        connect(L, s);
    }
    // Runs until nothing is left; the one completion on `side`'s CQ.
    WcStatus only_completion(int side, CqHandle cq) {
        L.settle();
        const std::vector<Wc> wcs = drain(L[side], cq);
        EXPECT_EQ(wcs.size(), 1u);
        return wcs.empty() ? WcStatus::Success : wcs[0].status;
    }
};

TEST(TransportNullMr, IsASourceOnly) {
    std::vector<uint8_t> mem(kMem, 0x11);
    {
        // A READ whose result would land in a null MR: no local write.
        NullPair n;
        EXPECT_EQ(n.L[0].alloc_null_mr(PdHandle{99}).error.err, EINVAL);
        const MrHandle real = n.L[1].reg_mr(n.s[1].pd, mem.data(), kMem, kLocalWrite | kRemoteRead).value;
        SendWr read = make_wr(1, WrOpcode::RdmaRead, mem.data(), 64, n.null[0].lkey);
        read.remote_addr = reinterpret_cast<uint64_t>(mem.data());
        read.rkey = real.rkey;
        ASSERT_FALSE(n.L[0].post_send(n.s[0].qpn, std::array{read}, n.L.fx[0]));
        EXPECT_EQ(n.only_completion(0, n.s[0].scq), WcStatus::LocProtErr);
        // Deregistered like any MR, after which its key is unknown.
        EXPECT_FALSE(n.L[1].dereg_mr(n.null[1]));
        EXPECT_EQ(n.L[1].dereg_mr(n.null[1]).err, EINVAL);
    }
    {
        // A WRITE to a peer's null MR by its key: no remote access.
        NullPair n;
        SendWr write = make_wr(2, WrOpcode::RdmaWrite, mem.data(), 64, n.null[0].lkey);
        write.remote_addr = 0x1000;
        write.rkey = n.null[1].rkey;
        ASSERT_FALSE(n.L[0].post_send(n.s[0].qpn, std::array{write}, n.L.fx[0]));
        EXPECT_EQ(n.only_completion(0, n.s[0].scq), WcStatus::RemAccessErr);
    }
    {
        // A receive into a null MR: nothing is written, the SEND fails.
        NullPair n;
        ASSERT_FALSE(n.L[1].post_recv(n.s[1].qpn, std::array{make_recv(7, mem.data(), 64, n.null[1].lkey)}, n.L.fx[1]));
        ASSERT_FALSE(
            n.L[0].post_send(n.s[0].qpn, std::array{make_wr(3, WrOpcode::Send, mem.data(), 64, n.null[0].lkey)}, n.L.fx[0]));
        EXPECT_EQ(n.only_completion(1, n.s[1].rcq), WcStatus::LocProtErr);
        EXPECT_TRUE(all_of_byte(mem, 0x11));
    }
}

// A discard MR: a peer's WRITEs into it are checked (a corrupted frame is
// dropped and sent again), acknowledged and counted, and nothing is written
// anywhere, not even at the address the RETH names. Locally it is a null MR.
TEST(TransportDiscardMr, WritesIntoItAreCheckedAcknowledgedAndPlacedNowhere) {
    Loop L;
    Side s[2];
    for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
    std::vector<uint8_t> src(kMem, 0x3C), far(kMem, 0xAA), rbuf(64, 0x11);
    const MrHandle real = L[0].reg_mr(s[0].pd, src.data(), kMem, kLocalWrite).value;
    const MrHandle sink = L[1].alloc_discard_mr(s[1].pd).value;
    const MrHandle rmr = L[1].reg_mr(s[1].pd, rbuf.data(), rbuf.size(), kLocalWrite).value;
    ASSERT_NE(sink.rkey, 0u);
    EXPECT_EQ(L[1].alloc_discard_mr(PdHandle{99}).error.err, EINVAL);
    connect(L, s);
    // The second frame of side 0 arrives corrupted, once.
    L.filter = [](int from, const wire::RocePacket&, uint64_t i) {
        Delivery d;
        d.corrupt = from == 0 && i == 1;
        return d;
    };
    auto write = [&](uint64_t id, WrOpcode op, uint32_t len, size_t at) {
        SendWr w = make_wr(id, op, src.data() + at, len, real.lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(far.data() + at);
        w.rkey = sink.rkey;
        w.imm_data = 0x1234;
        EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    };
    ASSERT_FALSE(L[1].post_recv(s[1].qpn, std::array{make_recv(9, rbuf.data(), 64, rmr.lkey)}, L.fx[1]));
    write(1, WrOpcode::RdmaWrite, 2999, 0);  // 3 packets, the second corrupted
    write(2, WrOpcode::RdmaWrite, 40, 4096);
    write(3, WrOpcode::RdmaWriteWithImm, 600, 8192);
    L.settle();
    const std::vector<Wc> sent = drain(L[0], s[0].scq), got = drain(L[1], s[1].rcq);
    ASSERT_EQ(sent.size(), 3u);
    for (const Wc& wc : sent) EXPECT_EQ(wc.status, WcStatus::Success) << "wr " << wc.wr_id;
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, WcStatus::Success);
    EXPECT_EQ(got[0].opcode, WcOpcode::RecvRdmaWithImm);
    EXPECT_EQ(got[0].byte_len, 600u);
    EXPECT_EQ(L[1].counters().drops[static_cast<size_t>(DropReason::BadIcrc)], 1u);
    EXPECT_EQ(L[1].counters().rcvd_bytes, 2999u + 40u + 600u);
    EXPECT_TRUE(all_of_byte(far, 0xAA));
    EXPECT_TRUE(all_of_byte(rbuf, 0x11));

    // Locally a null MR: a receive into it fails, a READ by its key too (no
    // remote read), and it deregisters like any MR.
    ASSERT_FALSE(L[1].post_recv(s[1].qpn, std::array{make_recv(10, far.data(), 64, sink.lkey)}, L.fx[1]));
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{make_wr(4, WrOpcode::Send, src.data(), 64, real.lkey)}, L.fx[0]));
    L.settle();
    const std::vector<Wc> recv = drain(L[1], s[1].rcq);
    ASSERT_EQ(recv.size(), 1u);
    EXPECT_EQ(recv[0].status, WcStatus::LocProtErr);
    EXPECT_TRUE(all_of_byte(far, 0xAA));
    EXPECT_FALSE(L[1].dereg_mr(sink));
    EXPECT_EQ(L[1].dereg_mr(sink).err, EINVAL);
}

TEST(TransportDiscardMr, GrantsNoRemoteRead) {
    Loop L;
    Side s[2];
    for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
    std::vector<uint8_t> mem(kMem, 0x11);
    const MrHandle local = L[0].reg_mr(s[0].pd, mem.data(), kMem, kLocalWrite).value;
    const MrHandle sink = L[1].alloc_discard_mr(s[1].pd).value;
    connect(L, s);
    SendWr read = make_wr(1, WrOpcode::RdmaRead, mem.data(), 64, local.lkey);
    read.remote_addr = 0x1000;
    read.rkey = sink.rkey;
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{read}, L.fx[0]));
    L.settle();
    const std::vector<Wc> wcs = drain(L[0], s[0].scq);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::RemAccessErr);
    EXPECT_TRUE(all_of_byte(mem, 0x11));
}

}  // namespace
}  // namespace rocemu::transport::test
