// The control channel of a split fabric across machines (control.hpp):
// addresses, one snapshot per connection, and a client that never hangs.
// Over loopback; the server is driven by hand as the switch node's loop
// drives it.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

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
