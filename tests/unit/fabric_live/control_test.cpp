// The control channel of a split fabric across machines (control.hpp):
// addresses, one snapshot per connection, and a client that never hangs.
// Over loopback; the server is driven by hand as the switch node's loop
// drives it.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "fabric/live/control.hpp"

namespace rocemu::fabric::live {
namespace {

TEST(FabricLiveControl, HostPortsParse) {
    const auto a = parse_host_port("10.0.0.2:7700");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->host, "10.0.0.2");
    EXPECT_EQ(a->port, 7700);
    EXPECT_EQ(format_host_port(*a), "10.0.0.2:7700");
    EXPECT_EQ(parse_host_port("switch-a.lab:1")->host, "switch-a.lab");
    EXPECT_FALSE(parse_host_port("10.0.0.2"));
    EXPECT_FALSE(parse_host_port(":7700"));
    EXPECT_FALSE(parse_host_port("10.0.0.2:"));
    EXPECT_FALSE(parse_host_port("10.0.0.2:65536"));
    EXPECT_FALSE(parse_host_port("10.0.0.2:77x"));
    EXPECT_FALSE(parse_host_port("10.0.0.2:0"));
    EXPECT_TRUE(parse_host_port("10.0.0.2:0", true));
}

// A client on its own thread (it blocks until the server answers, as the
// hosts node does); the test thread plays the switch node's loop.
struct Client {
    std::optional<std::string> text;
    std::string error;
    std::thread th;
    Client(const HostPort& at, Nanos timeout) : th([this, at, timeout] { text = fetch_control(at, timeout, error); }) {}
    ~Client() {
        if (th.joinable()) th.join();
    }
};

TEST(FabricLiveControl, EachConnectionGetsTheSnapshotTakenAfterItWasAccepted) {
    std::string error;
    auto srv = ControlServer::listen({"127.0.0.1", 0}, error);
    ASSERT_TRUE(srv) << error;
    ASSERT_NE(srv->port(), 0);
    const HostPort at{"127.0.0.1", srv->port()};
    EXPECT_FALSE(srv->accept_waiting());
    // A reply larger than a socket buffer takes several flushes.
    const std::string big(4 << 20, 'x');
    {
        Client c(at, Nanos::from_s(20));
        while (!srv->accept_waiting()) std::this_thread::yield();
        srv->answer(big);
        while (srv->open_connections() > 0) srv->flush();
        c.th.join();
        ASSERT_TRUE(c.text) << c.error;
        EXPECT_EQ(*c.text, big);
    }
    {
        Client c(at, Nanos::from_s(20));
        while (!srv->accept_waiting()) std::this_thread::yield();
        srv->answer("second\n");
        while (srv->open_connections() > 0) srv->flush();
        c.th.join();
        ASSERT_TRUE(c.text) << c.error;
        EXPECT_EQ(*c.text, "second\n");
    }
    EXPECT_FALSE(srv->accept_waiting());
}

// A connection that sent a request line gets the handler's answer to it,
// one that sent nothing but the end of its side the snapshot; the request is
// the line without its newline. Raw clients: two send before the server
// accepts; one (a slow network's) sends its line only after the server took
// the connection and polled it, and is answered only then, not with the
// snapshot; one sends nothing at all and is answered with the snapshot
// after kRequestPolls polls.
TEST(FabricLiveControl, ARequestLineGetsItsOwnAnswerAndNoRequestTheSnapshot) {
    std::string error;
    auto srv = ControlServer::listen({"127.0.0.1", 0}, error);
    ASSERT_TRUE(srv) << error;
    sockaddr_in sa{};
    ASSERT_TRUE(resolve_ipv4({"127.0.0.1", srv->port()}, sa, error)) << error;
    const auto connect_to = [&] {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa), 0);
        return fd;
    };
    const int plain = connect_to(), asking = connect_to();
    const std::string line = "pcap h0-left\n";
    ASSERT_EQ(send(asking, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
    ASSERT_EQ(shutdown(plain, SHUT_WR), 0);
    std::vector<std::string> asked;
    const auto on_request = [&](const std::string& r) {
        asked.push_back(r);
        return "capture of " + r;
    };
    // Both have asked once their bytes are in: a bounded number of polls.
    for (int i = 0; i < 100000 && srv->open_connections() < 2; ++i) srv->accept_waiting();
    ASSERT_EQ(srv->open_connections(), 2u);
    for (int i = 0; i < 100000 && !srv->accept_waiting(); ++i) {
    }
    srv->answer("snapshot\n", on_request);
    while (srv->open_connections() > 0) srv->flush();
    // Late: accepted and polled before its line is sent.
    const int late = connect_to(), silent = connect_to();
    for (int i = 0; i < 100000 && srv->open_connections() < 2; ++i) EXPECT_FALSE(srv->accept_waiting());
    ASSERT_EQ(srv->open_connections(), 2u);
    srv->answer("snapshot\n", on_request);  // nobody has asked: nothing
    EXPECT_EQ(srv->open_connections(), 2u);
    const std::string late_line = "pcap left-right\n";
    ASSERT_EQ(send(late, late_line.data(), late_line.size(), 0), static_cast<ssize_t>(late_line.size()));
    uint32_t polls = 0;
    while (!srv->accept_waiting()) ++polls;
    EXPECT_LT(polls, ControlServer::kRequestPolls);  // the line, not the silent one's time out
    srv->answer("snapshot\n", on_request);
    EXPECT_EQ(srv->open_connections(), 1u);  // the silent one waits on
    for (uint32_t i = 0; i < ControlServer::kRequestPolls && !srv->accept_waiting(); ++i) {
    }
    srv->answer("snapshot\n", on_request);
    while (srv->open_connections() > 0) srv->flush();
    const auto read_all = [](int fd) {
        std::string got;
        char buf[256];
        for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
        close(fd);
        return got;
    };
    EXPECT_EQ(read_all(plain), "snapshot\n");
    EXPECT_EQ(read_all(asking), "capture of pcap h0-left");
    EXPECT_EQ(read_all(late), "capture of pcap left-right");
    EXPECT_EQ(read_all(silent), "snapshot\n");
    EXPECT_EQ(asked, (std::vector<std::string>{"pcap h0-left", "pcap left-right"}));
}

// The offset of a remote clock from a reply's stamp: the stamp was taken
// between the connect and the reply being read, so it stands for
// the middle of that span, give or take half of it; no stamp, no offset.
TEST(FabricLiveControl, ClockOffsetFromAReplysStamp) {
    // Connect at 1 s, up 0.2 ms later, reply read at 1.0012 s; the remote
    // stamped 5 ms ahead of us.
    const FetchTimes t{1'000'000'000, 1'000'200'000, 1'001'200'000};
    const auto c = clock_offset(1'000'600'000 + 5'000'000, t);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->offset.v, 5'000'000);
    EXPECT_EQ(c->error.v, 600'000);
    const auto behind = clock_offset(1'000'600'000 - 3'000'000'000, t);
    ASSERT_TRUE(behind);
    EXPECT_EQ(behind->offset.v, -3'000'000'000);
    // An odd span: the error rounds up, so the bound still holds at both ends.
    const FetchTimes odd{100, 101, 103};
    const ClockOffset lo = *clock_offset(100, odd), hi = *clock_offset(103, odd);
    EXPECT_GE(lo.offset.v + lo.error.v, 0);
    EXPECT_LE(hi.offset.v - hi.error.v, 0);
    EXPECT_FALSE(clock_offset(0, t));
    EXPECT_FALSE(clock_offset(5, FetchTimes{10, 5, 20}));
}

// Over loopback both ends read one clock: the offset found is within its
// error of zero, and the times are filled in order.
TEST(FabricLiveControl, AFetchOnOneMachineFindsNoOffset) {
    std::string error;
    auto srv = ControlServer::listen({"127.0.0.1", 0}, error);
    ASSERT_TRUE(srv) << error;
    FetchTimes times;
    std::optional<std::string> text;
    std::thread th([&] { text = fetch_control({"127.0.0.1", srv->port()}, Nanos::from_s(20), error, &times); });
    while (!srv->accept_waiting()) std::this_thread::yield();
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    srv->answer(std::to_string(int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec));
    while (srv->open_connections() > 0) srv->flush();
    th.join();
    ASSERT_TRUE(text) << error;
    EXPECT_LE(times.start, times.connected);
    EXPECT_LE(times.connected, times.done);
    const auto c = clock_offset(std::stoll(*text), times);
    ASSERT_TRUE(c);
    // The stamp lies between connected and done on the same clock: the true
    // offset, 0, is within the error found.
    EXPECT_LE(std::abs(c->offset.v), c->error.v) << c->offset.v;
}

TEST(FabricLiveControl, ASecondServerOnTheSamePortIsRefusedNamingIt) {
    std::string error;
    auto srv = ControlServer::listen({"127.0.0.1", 0}, error);
    ASSERT_TRUE(srv) << error;
    EXPECT_FALSE(ControlServer::listen({"127.0.0.1", srv->port()}, error));
    EXPECT_NE(error.find("cannot listen on 127.0.0.1:" + std::to_string(srv->port())), std::string::npos) << error;
    EXPECT_FALSE(ControlServer::listen({"no.such.host.invalid", 1}, error));
    EXPECT_NE(error.find("cannot resolve no.such.host.invalid"), std::string::npos) << error;
}

TEST(FabricLiveControl, NoListenerIsARefusedConnection) {
    std::string error;
    auto srv = ControlServer::listen({"127.0.0.1", 0}, error);
    ASSERT_TRUE(srv) << error;
    const HostPort at{"127.0.0.1", srv->port()};
    srv.reset();
    EXPECT_FALSE(fetch_control(at, Nanos::from_s(5), error));
    EXPECT_EQ(error, "connect: Connection refused");
}

TEST(FabricLiveControl, AServerThatNeverAnswersTimesTheClientOut) {
    // Listening but never accepted: the kernel completes the connection, no reply comes.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    ASSERT_EQ(listen(fd, 4), 0);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
    std::string error;
    EXPECT_FALSE(fetch_control({"127.0.0.1", ntohs(sa.sin_port)}, Nanos::from_ms(200), error));
    EXPECT_EQ(error, "no whole reply within 0.2 s");
    close(fd);
}

}  // namespace
}  // namespace rocemu::fabric::live
