#include "fabric/live/control.hpp"
#include "fabric/live/monotonic.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

namespace rocemu::fabric::live {

namespace {

// More waiting connections than this are closed unanswered: the hosts node
// opens one per switch at a time.
constexpr size_t kMaxConnections = 64;
constexpr size_t kMaxRequest = 512;  // bytes of a request line

}  // namespace

std::optional<HostPort> parse_host_port(std::string_view s, bool allow_any_port) {
    const size_t colon = s.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return std::nullopt;
    unsigned port = 0;
    const std::string_view p = s.substr(colon + 1);
    if (std::from_chars(p.data(), p.data() + p.size(), port).ptr != p.data() + p.size()) return std::nullopt;
    if (port > 65535 || (port == 0 && !allow_any_port)) return std::nullopt;
    return HostPort{std::string(s.substr(0, colon)), static_cast<uint16_t>(port)};
}

std::string format_host_port(const HostPort& hp) { return fmt::format("{}:{}", hp.host, hp.port); }

bool resolve_ipv4(const HostPort& hp, sockaddr_in& sa, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(hp.host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || !res) {
        error = fmt::format("cannot resolve {}: {}", hp.host, gai_strerror(rc));
        return false;
    }
    std::memcpy(&sa, res->ai_addr, sizeof sa);
    freeaddrinfo(res);
    sa.sin_port = htons(hp.port);
    return true;
}


std::unique_ptr<ControlServer> ControlServer::listen(const HostPort& at, std::string& error) {
    sockaddr_in sa{};
    if (!resolve_ipv4(at, sa, error)) return nullptr;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 16) != 0) {
        error = fmt::format("cannot listen on {}: {}", format_host_port(at), std::strerror(errno));
        if (fd >= 0) close(fd);
        return nullptr;
    }
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    return std::unique_ptr<ControlServer>(new ControlServer(fd, ntohs(sa.sin_port)));
}

ControlServer::~ControlServer() {
    for (const Conn& c : conns_) close(c.fd);
    close(fd_);
}

bool ControlServer::accept_waiting() {
    for (;;) {
        const int c = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) break;
        if (conns_.size() >= kMaxConnections) {
            close(c);
            continue;
        }
        conns_.push_back(Conn{c});
    }
    for (Conn& c : conns_)
        if (!c.asked) read_request(c);
    return std::any_of(conns_.begin(), conns_.end(), [](const Conn& c) { return c.asked && !c.answered; });
}

// A client sends its request line, or nothing, and then the end of its
// side (fetch_control): asked once a line or that end has arrived, or after
// kRequestPolls polls without either (a client that sends neither gets the
// snapshot then).
void ControlServer::read_request(Conn& c) {
    char buf[kMaxRequest];
    for (;;) {
        const ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (++c.polls < kRequestPolls) return;
            break;  // neither a line nor its end: the snapshot
        }
        if (n <= 0) break;  // its end, or an error: the reply finds out
        c.request.append(buf, static_cast<size_t>(n));
        if (const size_t nl = c.request.find('\n'); nl != std::string::npos) {
            c.request.resize(nl);
            c.asked = true;
            return;
        }
        if (c.request.size() > kMaxRequest) break;  // no line of ours
    }
    c.request.clear();
    c.asked = true;
}

void ControlServer::answer(std::string_view text, const std::function<std::string(const std::string&)>& on_request) {
    for (Conn& c : conns_)
        if (c.asked && !c.answered) {
            if (!c.request.empty() && on_request) c.out = on_request(c.request);
            else c.out.assign(text);
            c.answered = true;
        }
    flush();
}

void ControlServer::flush() {
    for (Conn& c : conns_) {
        if (!c.answered) continue;
        while (c.sent < c.out.size()) {
            const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                c.sent += static_cast<size_t>(n);
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            c.sent = c.out.size();  // the reader has gone: nothing more to give it
        }
        if (c.sent == c.out.size()) {
            close(c.fd);
            c.fd = -1;
        }
    }
    std::erase_if(conns_, [](const Conn& c) { return c.fd < 0; });
}

std::optional<ClockOffset> clock_offset(int64_t remote, const FetchTimes& t) {
    if (remote == 0 || t.done < t.connected || t.connected < t.start) return std::nullopt;
    const int64_t half = (t.done - t.start) / 2;
    return ClockOffset{Nanos{remote - (t.start + half)}, Nanos{t.done - t.start - half}};
}

std::optional<std::string> fetch_control(const HostPort& at, Nanos timeout, std::string& error, FetchTimes* times,
                                         std::string_view request) {
    FetchTimes when;
    sockaddr_in sa{};
    if (!resolve_ipv4(at, sa, error)) return std::nullopt;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        error = fmt::format("socket: {}", std::strerror(errno));
        return std::nullopt;
    }
    const int64_t deadline = monotonic_ns() + timeout.v;
    // Waits for `events` until the deadline: false and `error` on a timeout.
    const auto wait = [&](short events, const char* what) {
        pollfd p{fd, events, 0};
        for (;;) {
            const int64_t left_ms = (deadline - monotonic_ns()) / 1000000;
            const int rc = left_ms > 0 ? poll(&p, 1, static_cast<int>(left_ms)) : 0;
            if (rc > 0) return true;
            if (rc < 0 && errno == EINTR) continue;
            error = fmt::format("{} within {:.1f} s", what, timeout.seconds());
            return false;
        }
    };
    std::optional<std::string> text;
    when.start = realtime_ns();
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
        error = fmt::format("connect: {}", std::strerror(errno));
    } else if (wait(POLLOUT, "no connection")) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        when.connected = realtime_ns();
        const std::string line = request.empty() ? std::string() : std::string(request) + "\n";
        if (err != 0) {
            error = fmt::format("connect: {}", std::strerror(err));
        } else if (!line.empty() && send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
            error = fmt::format("send: {}", std::strerror(errno));
        } else if (shutdown(fd, SHUT_WR) != 0) {  // the server answers once this end arrives
            error = fmt::format("shutdown: {}", std::strerror(errno));
        } else {
            std::string got;
            char buf[65536];
            for (;;) {
                const ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n > 0) {
                    got.append(buf, static_cast<size_t>(n));
                } else if (n == 0) {
                    when.done = realtime_ns();
                    text = std::move(got);
                    break;
                } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                    if (!wait(POLLIN, "no whole reply")) break;
                } else {
                    error = fmt::format("recv: {}", std::strerror(errno));
                    break;
                }
            }
        }
    }
    close(fd);
    if (text && times) *times = when;
    return text;
}

}  // namespace rocemu::fabric::live
