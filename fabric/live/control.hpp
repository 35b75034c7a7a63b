// The control channel of a fabric split across machines: a switch node
// serves its counter snapshot (split.hpp, which says whether it is ready and
// which fabric it runs) over TCP, one snapshot per connection, then closes;
// the hosts node fetches it instead of reading the switch's files in a
// shared --link-dir. The server never blocks, so the switch node drives it
// from its packet loop without a thread. Free of DPDK.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/units.hpp"

namespace rocemu::fabric::live {

// "HOST:PORT" (an IPv4 address or a name, port 1-65535; port 0 allowed
// with `allow_any_port`, for a server that picks one).
struct HostPort {
    std::string host;
    uint16_t port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view s, bool allow_any_port = false);
std::string format_host_port(const HostPort& hp);

class ControlServer {
public:
    // Listens on `at` (non-blocking). nullptr and `error` naming the
    // address if it cannot.
    static std::unique_ptr<ControlServer> listen(const HostPort& at, std::string& error);
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Accepts the connections waiting; true if any has no reply yet.
    bool accept_waiting();
    // `text` becomes the reply of every connection without one; writes what
    // the sockets take now and closes the connections fully answered. The
    // rest is written by later calls (or flush()).
    void answer(std::string_view text);
    void flush();
    // The port listened on (the one the kernel picked for port 0).
    uint16_t port() const { return port_; }
    size_t open_connections() const { return conns_.size(); }

private:
    struct Conn {
        int fd = -1;
        std::string out;
        size_t sent = 0;
        bool answered = false;
    };
    ControlServer(int fd, uint16_t port) : fd_(fd), port_(port) {}
    int fd_ = -1;
    uint16_t port_ = 0;
    std::vector<Conn> conns_;
};

// Connects to `at` and reads until the peer closes, all within `timeout`.
// nullopt and `error` ("connect: Connection refused", "no reply within
// 2 s") when it cannot.
std::optional<std::string> fetch_control(const HostPort& at, Nanos timeout, std::string& error);

}  // namespace rocemu::fabric::live
