// The control channel of a fabric split across machines: a switch node
// serves its counter snapshot (split.hpp, which says whether it is ready and
// which fabric it runs) over TCP, one snapshot per connection, then closes;
// the hosts node fetches it instead of reading the switch's files in a
// shared --link-dir. A client may also ask for something else with a line
// it sends at once (`pcap LINK`: the switch's capture of a link, after the
// run); every client then ends its side of the connection, and the server
// answers once the line or that end has arrived, so a request that crosses
// a slow network is not answered with the snapshot. The server never
// blocks, so the switch node drives it from its packet loop without a
// thread. Free of DPDK.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
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
// The IPv4 address and port of `hp`, resolving a name; false and `error` if
// it cannot.
bool resolve_ipv4(const HostPort& hp, sockaddr_in& sa, std::string& error);

class ControlServer {
public:
    // Listens on `at` (non-blocking). nullptr and `error` naming the
    // address if it cannot.
    static std::unique_ptr<ControlServer> listen(const HostPort& at, std::string& error);
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Accepts the connections waiting and reads what each has sent so far;
    // true if any has asked (its request line, or the end of its side, has
    // arrived) and has no reply yet.
    bool accept_waiting();
    // Polls of accept_waiting() after which a connection that sent neither
    // a line nor its end is answered with the snapshot (1 s at the switch
    // node's 1 ms).
    static constexpr uint32_t kRequestPolls = 1000;
    // `text` becomes the reply of every connection that asked and has none
    // yet with no request line, `on_request(line)` of one with a line
    // (without the newline; no handler: `text` too); writes what the
    // sockets take now and closes the connections fully answered. The rest
    // is written by later calls (or flush()).
    void answer(std::string_view text, const std::function<std::string(const std::string&)>& on_request = {});
    void flush();
    // The port listened on (the one the kernel picked for port 0).
    uint16_t port() const { return port_; }
    size_t open_connections() const { return conns_.size(); }

private:
    struct Conn {
        int fd = -1;
        std::string request;  // the line it sent before its reply, if any
        std::string out;
        size_t sent = 0;
        uint32_t polls = 0;  // accept_waiting() calls it has waited for its request
        bool asked = false;
        bool answered = false;
    };
    void read_request(Conn& c);
    ControlServer(int fd, uint16_t port) : fd_(fd), port_(port) {}
    int fd_ = -1;
    uint16_t port_ = 0;
    std::vector<Conn> conns_;
};

// When a fetch_control() ran, on this machine's CLOCK_REALTIME: connect()
// called, the connection up, the whole reply read.
struct FetchTimes {
    int64_t start = 0;
    int64_t connected = 0;
    int64_t done = 0;
};

// Connects to `at`, sends `request` and a newline if not empty, ends its
// side of the connection (the server answers once that has arrived), and
// reads until the peer closes, all within `timeout`. nullopt and `error`
// ("connect: Connection refused", "no reply within 2 s") when it cannot.
// `times`, if given, is filled when it can.
std::optional<std::string> fetch_control(const HostPort& at, Nanos timeout, std::string& error,
                                         FetchTimes* times = nullptr, std::string_view request = {});

// How far the serving machine's CLOCK_REALTIME is ahead of this machine's,
// from the stamp `remote` it put in its reply to a fetch that took `t`. A
// server stamps a reply after it accepted the connection (so after
// `t.start` here: not after `t.connected`, which this process may see late)
// and sends it after the stamp (so before `t.done`): the stamp stands for
// the middle of [start, done] and `error` is half that span, a bound that
// holds whatever the two directions' delays (a switch node answers within
// 1 ms, so on a LAN the span is about 1 ms plus the round trip). A stamp of
// 0 (a server that tells none) gives nullopt.
struct ClockOffset {
    Nanos offset;
    Nanos error;
};
std::optional<ClockOffset> clock_offset(int64_t remote, const FetchTimes& t);

}  // namespace rocemu::fabric::live
