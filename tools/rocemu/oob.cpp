#include "tools/rocemu/oob.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace rocemu::oob {

namespace {

int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool parse_hex(const char* s, size_t n, uint32_t& out) {
    out = 0;
    for (size_t i = 0; i < n; ++i) {
        const int v = hexval(s[i]);
        if (v < 0) return false;
        out = out << 4 | static_cast<uint32_t>(v);
    }
    return true;
}

int ms_left(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

std::chrono::steady_clock::time_point deadline_after(Nanos t) {
    return std::chrono::steady_clock::now() + std::chrono::nanoseconds(t.v);
}

}  // namespace

std::array<char, kRecordLen> format_record(const PingpongDest& d) {
    std::array<char, kRecordLen> rec{};
    std::string s = fmt::format("{:04x}:{:06x}:{:06x}:", d.lid, d.qpn & 0xFFFFFF, d.psn & 0xFFFFFF);
    for (uint8_t b : d.gid) s += fmt::format("{:02x}", b);
    std::memcpy(rec.data(), s.data(), std::min(s.size(), kRecordLen - 1));
    return rec;
}

std::optional<PingpongDest> parse_record(const char* rec, size_t len) {
    // "LLLL:QQQQQQ:PPPPPP:" + 32 hex digits, then NUL.
    if (len < 51 || rec[4] != ':' || rec[11] != ':' || rec[18] != ':') return std::nullopt;
    PingpongDest d;
    uint32_t lid = 0;
    if (!parse_hex(rec, 4, lid) || !parse_hex(rec + 5, 6, d.qpn) || !parse_hex(rec + 12, 6, d.psn)) return std::nullopt;
    d.lid = static_cast<uint16_t>(lid);
    for (int i = 0; i < 16; ++i) {
        const int hi = hexval(rec[19 + 2 * i]), lo = hexval(rec[20 + 2 * i]);
        if (hi < 0 || lo < 0) return std::nullopt;
        d.gid[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    return d;
}

namespace detail {

void close_fd(int fd) {
    if (fd >= 0) ::close(fd);
}

bool write_all(int fd, const char* buf, size_t len, std::string& error) {
    while (len > 0) {
        const ssize_t n = ::send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error = fmt::format("send failed: {}", std::strerror(errno));
            return false;
        }
        buf += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

bool read_exact(int fd, char* buf, size_t len, Nanos timeout, std::string& error, bool allow_short) {
    const auto deadline = deadline_after(timeout);
    size_t got = 0;
    while (got < len) {
        pollfd p{fd, POLLIN, 0};
        const int rc = ::poll(&p, 1, ms_left(deadline));
        if (rc == 0) {
            error = fmt::format("timed out after {:.1f} s waiting for the peer's record", timeout.seconds());
            return false;
        }
        if (rc < 0 && errno == EINTR) continue;
        const ssize_t n = ::recv(fd, buf + got, len - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (allow_short && got > 0) return true;
            error = n == 0 ? "the peer closed the connection" : fmt::format("recv failed: {}", std::strerror(errno));
            return false;
        }
        got += static_cast<size_t>(n);
    }
    return true;
}

int listen_and_accept(uint16_t port, Nanos timeout, std::string& error) {
    const int s = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (s < 0) {
        error = fmt::format("socket: {}", std::strerror(errno));
        return -1;
    }
    int one = 1, zero = 0;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // accept IPv4 clients too
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(port);
    if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 || ::listen(s, 1) < 0) {
        error = fmt::format("cannot listen on TCP port {}: {}", port, std::strerror(errno));
        ::close(s);
        return -1;
    }
    // Signals interrupt the wait (net_tap's queues raise SIGIO-style real-time signals): wait on.
    const auto deadline = deadline_after(timeout);
    pollfd p{s, POLLIN, 0};
    int rc;
    do rc = ::poll(&p, 1, ms_left(deadline));
    while (rc < 0 && errno == EINTR);
    if (rc <= 0) {
        error = fmt::format("no client connected to TCP port {} within {:.1f} s", port, timeout.seconds());
        ::close(s);
        return -1;
    }
    const int fd = ::accept(s, nullptr, nullptr);
    ::close(s);
    if (fd < 0) error = fmt::format("accept: {}", std::strerror(errno));
    return fd;
}

}  // namespace detail

int tcp_connect(const std::string& host, uint16_t port, Nanos timeout, std::string& error) {
    const auto deadline = deadline_after(timeout);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    if (const int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); e != 0) {
        error = fmt::format("cannot resolve {}: {}", host, gai_strerror(e));
        return -1;
    }
    int fd = -1;
    std::string last_error;
    while (fd < 0) {
        for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
            fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd < 0) continue;
            if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
                last_error = std::strerror(errno);
                ::close(fd);
                fd = -1;
            }
        }
        if (fd >= 0 || ms_left(deadline) == 0) break;
        // The server may not be listening yet: ibv_*_pingpong servers are started first by hand, scripts race.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::freeaddrinfo(res);
    if (fd < 0)
        error = fmt::format("couldn't connect to {}:{} within {:.1f} s ({})", host, port, timeout.seconds(), last_error);
    return fd;
}

Result connect(const std::string& host, uint16_t port, const PingpongDest& local, Nanos timeout) {
    Result r;
    const auto deadline = deadline_after(timeout);
    const int fd = tcp_connect(host, port, timeout, r.error);
    if (fd < 0) return r;
    const auto rec = format_record(local);
    char buf[kRecordLen];
    if (detail::write_all(fd, rec.data(), rec.size(), r.error) &&
        detail::read_exact(fd, buf, kRecordLen, Nanos{static_cast<int64_t>(ms_left(deadline)) * 1000000 + 1000000},
                           r.error)) {
        r.remote = parse_record(buf, kRecordLen);
        if (!r.remote) r.error = "malformed address record from the server";
        else if (!detail::write_all(fd, "done", 5, r.error)) r.remote.reset();
    }
    ::close(fd);
    return r;
}

LineConn::~LineConn() { detail::close_fd(fd_); }

bool LineConn::send(const std::string& line, std::string& error) {
    const std::string l = line + "\n";
    return detail::write_all(fd_, l.data(), l.size(), error);
}

int LineConn::try_recv(std::string& line, std::string& error) {
    for (;;) {
        if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
            line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return 1;
        }
        char chunk[4096];
        const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n > 0) {
            buf_.append(chunk, static_cast<size_t>(n));
            if (buf_.size() > kMaxLine && buf_.find('\n') == std::string::npos) {
                error = fmt::format("the peer sent {} bytes without a newline (a line is at most {}): not a rocemu "
                                    "peer?", buf_.size(), kMaxLine);
                buf_.clear();
                return -1;
            }
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        error = n == 0 ? "the peer closed the connection" : fmt::format("recv failed: {}", std::strerror(errno));
        return -1;
    }
}

std::string LineConn::fmt_timeout(Nanos timeout) {
    return fmt::format("no answer from the peer within {:.1f} s", timeout.seconds());
}

std::unique_ptr<LineConn> accept_lines(uint16_t port, Nanos timeout, std::string& error) {
    const int fd = detail::listen_and_accept(port, timeout, error);
    return fd < 0 ? nullptr : std::make_unique<LineConn>(fd);
}

std::unique_ptr<LineConn> connect_lines(const std::string& host, uint16_t port, Nanos timeout, std::string& error) {
    const int fd = tcp_connect(host, port, timeout, error);
    return fd < 0 ? nullptr : std::make_unique<LineConn>(fd);
}

}  // namespace rocemu::oob
