#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "tools/rocemu/oob.hpp"

namespace rocemu::oob {
namespace {

// The client's record in ../shared/captures/rc_send_64B.pcap (ibv_rc_pingpong -g 1).
constexpr char kCaptured[] = "0000:000011:1af67a:00000000000000000000ffff0a32000c";

TEST(Oob, RecordMatchesIbvRcPingpongByteForByte) {
    PingpongDest d;
    d.qpn = 0x11;
    d.psn = 0x1af67a;
    d.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0x0a, 0x32, 0x00, 0x0c};
    const auto rec = format_record(d);
    EXPECT_EQ(std::memcmp(rec.data(), kCaptured, sizeof kCaptured), 0) << std::string(rec.data());
    EXPECT_EQ(sizeof kCaptured, kRecordLen);
    const auto back = parse_record(kCaptured, sizeof kCaptured);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->qpn, 0x11u);
    EXPECT_EQ(back->psn, 0x1af67au);
    EXPECT_EQ(back->gid, d.gid);
}

TEST(Oob, MalformedRecordsAreRejected) {
    EXPECT_FALSE(parse_record("", 0));
    EXPECT_FALSE(parse_record(kCaptured, 40));
    char bad[kRecordLen];
    std::memcpy(bad, kCaptured, kRecordLen);
    bad[4] = '-';
    EXPECT_FALSE(parse_record(bad, kRecordLen));
    std::memcpy(bad, kCaptured, kRecordLen);
    bad[30] = 'z';
    EXPECT_FALSE(parse_record(bad, kRecordLen));
}

TEST(Oob, ServerAndClientExchangeOverLoopback) {
    const uint16_t port = static_cast<uint16_t>(20000 + getpid() % 20000);
    PingpongDest server_side, client_side;
    server_side.qpn = 0x12;
    server_side.psn = 0xabcdef;
    client_side.qpn = 0x34;
    client_side.psn = 0x000001;
    client_side.gid[15] = 7;
    uint32_t seen_by_callback = 0;
    Result server_result;
    std::thread server([&] {
        server_result = serve(port, server_side, Nanos::from_s(10), [&](const PingpongDest& remote) {
            seen_by_callback = remote.qpn;
            return std::string();
        });
    });
    // The client retries until the server listens, so no ordering is needed here.
    const Result client_result = connect("127.0.0.1", port, client_side, Nanos::from_s(10));
    server.join();
    ASSERT_TRUE(client_result.remote) << client_result.error;
    ASSERT_TRUE(server_result.remote) << server_result.error;
    EXPECT_EQ(client_result.remote->qpn, 0x12u);
    EXPECT_EQ(client_result.remote->psn, 0xabcdefu);
    EXPECT_EQ(server_result.remote->qpn, 0x34u);
    EXPECT_EQ(server_result.remote->gid[15], 7);
    EXPECT_EQ(seen_by_callback, 0x34u);
}

TEST(Oob, ClientGivesUpWithAClearError) {
    const Result r = connect("127.0.0.1", 1, PingpongDest{}, Nanos::from_ms(200));
    EXPECT_FALSE(r.remote);
    EXPECT_NE(r.error.find("couldn't connect to 127.0.0.1:1"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace rocemu::oob
