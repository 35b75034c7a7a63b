// Golden test against the rxe captures: the engine runs the same workload as
// each captured tool, and every frame it sends must parse cleanly (ICRC
// included) and follow the same per-direction pattern as rxe: opcodes,
// AckReq bits, PSNs relative to the first, AETH syndrome and MSN, payload
// and frame lengths.
#include <fmt/format.h>

#include <string>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/icrc.hpp"
#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {
namespace {

struct Sig {
    uint8_t opcode;
    bool ackreq;
    int32_t psn_rel;
    uint8_t syndrome;
    uint32_t msn;
    uint32_t payload_len;
    size_t frame_len;
    bool operator==(const Sig&) const = default;
};

void PrintTo(const Sig& x, std::ostream* os) {
    *os << fmt::format("{{op {:#04x} psn+{}}}", x.opcode, x.psn_rel);
}

std::string str(const std::vector<Sig>& v) {
    std::string s;
    for (const Sig& x : v)
        s += fmt::format("  {:#04x} a={} psn+{} syn={:#x} msn={} len={} frame={}\n", x.opcode, x.ackreq, x.psn_rel,
                         x.syndrome, x.msn, x.payload_len, x.frame_len);
    return s;
}

// Per-direction signatures. Direction 0 is the side that sent the first
// request; PSNs are relative to the first request PSN of the requesting side.
std::array<std::vector<Sig>, 2> signatures(const std::vector<std::pair<int, std::vector<uint8_t>>>& frames) {
    std::array<std::vector<Sig>, 2> out;
    std::array<std::optional<Psn>, 2> base;
    for (const auto& [dir, f] : frames) {
        wire::RocePacket p;
        if (wire::parse_roce(f, p) == wire::ParseError::Ok && (p.info().flags & wire::kOpRequest) && !base[dir])
            base[dir] = p.bth.psn;
    }
    for (const auto& [dir, f] : frames) {
        wire::RocePacket p;
        EXPECT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
        const bool request = p.info().flags & wire::kOpRequest;
        const int owner = request ? dir : 1 - dir;
        const Psn b = base[owner].value_or(p.bth.psn);
        const bool aeth = p.info().has(wire::Hdr::Aeth);
        out[dir].push_back({p.bth.opcode, p.bth.ackreq, Psn::diff(p.bth.psn, b),
                            static_cast<uint8_t>(aeth ? p.aeth.syndrome : 0), aeth ? p.aeth.msn : 0, p.payload_len,
                            f.size()});
    }
    return out;
}

std::vector<std::pair<int, std::vector<uint8_t>>> capture(const std::string& name) {
    std::vector<std::pair<int, std::vector<uint8_t>>> out;
    pcap::Reader r(std::string(ROCEMU_CAPTURES_DIR) + "/" + name);
    EXPECT_TRUE(r.ok()) << r.error();
    pcap::Frame fr;
    std::optional<wire::IpAddr> client;
    while (r.next(fr)) {
        if (wire::classify(fr.data) != wire::FrameKind::Roce) continue;
        wire::RocePacket p;
        if (wire::parse_roce(fr.data, p) != wire::ParseError::Ok) continue;
        if (!client) client = p.l3.src;
        std::vector<uint8_t> f(fr.data.begin(), fr.data.begin() + p.frame_len);
        out.emplace_back(p.l3.src == *client ? 0 : 1, std::move(f));
    }
    return out;
}

struct TransportGolden : ::testing::Test {
    Loop L;
    Side s[2];
    std::vector<uint8_t> mem[2];
    MrHandle mr[2];

    void setup(PathMtu mtu) {
        L.keep_log = true;
        for (int i = 0; i < 2; ++i) {
            s[i] = make_side(L[i]);
            mem[i].assign(1 << 20, 0);
            for (size_t k = 0; k < mem[i].size(); ++k) mem[i][k] = static_cast<uint8_t>(k * 13 + i);
            mr[i] = L[i].reg_mr(s[i].pd, mem[i].data(), mem[i].size(),
                                kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic)
                        .value;
        }
        ConnectOpts o;
        o.mtu = mtu;
        connect(L, s, o);
    }
    SendWr op(int side, WrOpcode code, uint32_t len, uint64_t id) {
        SendWr w = make_wr(id, code, mem[side].data() + 65536 * (id % 8), len, mr[side].lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(mem[1 - side].data()) + 65536 * (id % 8) + 524288;
        w.rkey = mr[1 - side].rkey;
        w.compare_add = 1;
        return w;
    }
    std::vector<std::pair<int, std::vector<uint8_t>>> ours() {
        std::vector<std::pair<int, std::vector<uint8_t>>> out;
        // The loop logs per side; order within a direction is what is compared.
        for (int d = 0; d < 2; ++d)
            for (auto& f : L.sent[d]) out.emplace_back(d, f);
        return out;
    }
    void run_posted(int n_sends) {
        std::vector<Wc> got;
        L.run([&] {
            auto m = drain(L[0], s[0].scq);
            got.insert(got.end(), m.begin(), m.end());
            return static_cast<int>(got.size()) >= n_sends;
        });
        L.settle();
        for (auto& w : got) EXPECT_EQ(w.status, WcStatus::Success);
    }
    void pingpong(uint32_t len, int n) {
        for (int side = 0; side < 2; ++side)
            for (int i = 0; i < n; ++i)
                ASSERT_FALSE(L[side].post_recv(
                    s[side].qpn, std::array{make_recv(i, mem[side].data() + 600000 + 8192 * i, 8192, mr[side].lkey)},
                    L.fx[side]));
        for (int i = 0; i < n; ++i) {
            for (int side = 0; side < 2; ++side) {
                ASSERT_FALSE(L[side].post_send(s[side].qpn, std::array{op(side, WrOpcode::Send, len, i)}, L.fx[side]));
                ASSERT_TRUE(L.run([&] { return !drain(L[1 - side], s[1 - side].rcq).empty(); }));
            }
        }
        L.settle();
    }
    void post_all(WrOpcode code, uint32_t len, int n) {
        for (int i = 0; i < n; ++i) ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{op(0, code, len, i)}, L.fx[0]));
        run_posted(n);
    }
    void compare(const std::string& file) {
        auto want = signatures(capture(file));
        auto got = signatures(ours());
        ASSERT_FALSE(want[0].empty());
        for (int d = 0; d < 2; ++d)
            EXPECT_EQ(got[d], want[d]) << file << " direction " << d << "\nrxe:\n" << str(want[d]) << "ours:\n"
                                       << str(got[d]);
        // What rxe checks or sets on every frame: P_Key, TVer 0, UDP checksum 0,
        // IPv4 DF and TTL 64, one source port per QP in the RoCEv2 range.
        for (int d = 0; d < 2; ++d) {
            std::optional<uint16_t> sport;
            for (auto& f : L.sent[d]) {
                wire::RocePacket p;
                ASSERT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
                EXPECT_EQ(p.bth.pkey, 0xFFFF);
                EXPECT_EQ(p.udp_csum, 0);
                EXPECT_EQ(p.l3.frag, 0x4000);
                EXPECT_EQ(p.l3.ttl, 64);
                if (!sport) sport = p.udp_sport;
                EXPECT_EQ(p.udp_sport, *sport);
                EXPECT_EQ(p.udp_sport, Engine::rxe_udp_sport(s[d].qpn, s[1 - d].qpn));
            }
        }
    }
};

TEST_F(TransportGolden, SendPingpong64) {
    setup(PathMtu::Mtu1024);
    pingpong(64, 5);
    compare("rc_send_64B.pcap");
}

TEST_F(TransportGolden, SendPingpong3000FirstMiddleLast) {
    setup(PathMtu::Mtu1024);
    const auto cap = capture("rc_send_3000B_first_middle_last.pcap");
    int n = 0;
    for (auto& [d, f] : cap) n += d == 0 && f[42] == wire::op::SEND_LAST;
    pingpong(3000, n);
    compare("rc_send_3000B_first_middle_last.pcap");
}

TEST_F(TransportGolden, Write64) {
    setup(PathMtu::Mtu1024);
    post_all(WrOpcode::RdmaWrite, 64, 5);
    compare("rc_write_64B.pcap");
}

TEST_F(TransportGolden, Write3000FirstMiddleLast) {
    setup(PathMtu::Mtu1024);
    post_all(WrOpcode::RdmaWrite, 3000, 5);
    compare("rc_write_3000B_first_middle_last.pcap");
}

TEST_F(TransportGolden, Read3000FirstMiddleLast) {
    setup(PathMtu::Mtu1024);
    post_all(WrOpcode::RdmaRead, 3000, 5);
    compare("rc_read_3000B_first_middle_last.pcap");
}

TEST_F(TransportGolden, AtomicFetchAdd) {
    setup(PathMtu::Mtu1024);
    post_all(WrOpcode::AtomicFetchAndAdd, 8, 5);
    compare("rc_atomic_fetch_add.pcap");
}

TEST_F(TransportGolden, Write9000AtMtu4096) {
    setup(PathMtu::Mtu4096);
    post_all(WrOpcode::RdmaWrite, 9000, 5);
    compare("mtu9000_rc_write_9000B_pmtu4096.pcap");
}

// The engine finishes its own frames with the in-place ICRC: it must give
// rxe's value on every captured frame, and leave the frame as it found it.
TEST(TransportIcrc, InPlaceMatchesRxeOnEveryCapture) {
    size_t n = 0;
    for (const char* name : {"rc_send_64B.pcap", "rc_send_3000B_first_middle_last.pcap", "rc_write_64B.pcap",
                             "rc_write_3000B_first_middle_last.pcap", "rc_read_3000B_first_middle_last.pcap",
                             "rc_atomic_fetch_add.pcap", "mtu9000_rc_write_9000B_pmtu4096.pcap", "ud_send_512B.pcap"}) {
        for (auto& [dir, f] : capture(name)) {
            wire::RocePacket p;
            ASSERT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
            const std::vector<uint8_t> before = f;
            const size_t len = p.frame_len - wire::kIcrcLen - p.l3_off;
            EXPECT_EQ(wire::compute_icrc_in_place(f.data() + p.l3_off, len, p.l3.v6), p.icrc) << name;
            EXPECT_EQ(f, before) << name;
            EXPECT_EQ(wire::compute_icrc(f.data() + p.l3_off, len, p.l3.v6), p.icrc) << name;
            ++n;
        }
    }
    EXPECT_GE(n, 40u);
    // No capture is IPv6: compare against the copying ICRC on built frames
    // whose variant fields are all set, both address families.
    for (bool v6 : {false, true}) {
        wire::RocePacket p;
        p.l3.v6 = v6;
        p.l3.src.b = {0xfe, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
        p.l3.dst.b = {0xfe, 0x80, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4};
        if (!v6) p.l3.src = wire::IpAddr::from_v4(0x0A000001), p.l3.dst = wire::IpAddr::from_v4(0x0A000002);
        p.l3.dscp = 26;
        p.l3.ecn = wire::ecn::kCe;
        p.l3.flow_label = 0xABCDE;
        p.l3.ttl = 17;
        p.udp_csum = 0x1234;
        p.bth.opcode = wire::op::kRc + wire::op::SEND_ONLY;
        p.bth.fecn = p.bth.becn = true;
        p.bth.dqpn = Qpn{0x11};
        p.bth.psn = Psn{77};
        std::vector<uint8_t> payload(301, 0x5A);
        p.payload = payload.data();
        p.payload_len = static_cast<uint32_t>(payload.size());
        std::vector<uint8_t> f(Engine::kMinTxBuf);
        const size_t len = wire::encode_roce(p, f);
        ASSERT_GT(len, 0u);
        f.resize(len);
        wire::RocePacket q;
        ASSERT_EQ(wire::parse_roce(f, q), wire::ParseError::Ok);
        const std::vector<uint8_t> before = f;
        EXPECT_EQ(wire::compute_icrc_in_place(f.data() + q.l3_off, q.frame_len - wire::kIcrcLen - q.l3_off, v6), q.icrc)
            << "v6 " << v6;
        EXPECT_EQ(f, before);
    }
}

}  // namespace
}  // namespace rocemu::transport::test
