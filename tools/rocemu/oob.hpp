// The out-of-band exchange of ibv_rc_pingpong and ibv_ud_pingpong (rdma-core
// libibverbs/examples): over TCP (port 18515 by default) each side sends one
// 52-byte record "LLLL:QQQQQQ:PPPPPP:GGGG...G\0" (LID, QPN, PSN in hex, GID as
// 32 hex digits in byte order), the client first; then the client sends
// "done\0". rocemu speaks it so it can pair with the real tools.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/units.hpp"

namespace rocemu::oob {

inline constexpr uint16_t kDefaultPort = 18515;
inline constexpr size_t kRecordLen = 52;

struct PingpongDest {
    uint16_t lid = 0;
    uint32_t qpn = 0;
    uint32_t psn = 0;
    std::array<uint8_t, 16> gid{};
};

std::array<char, kRecordLen> format_record(const PingpongDest& d);
std::optional<PingpongDest> parse_record(const char* rec, size_t len);

struct Result {
    std::optional<PingpongDest> remote;
    std::string error;  // why it failed, when remote is empty
};

// The server side: listens on `port` (all addresses), accepts one client,
// reads its record, calls `on_remote` (which must make the local QP ready to
// receive, as ibv_rc_pingpong moves its QP to RTR before answering), then
// answers with `local` and waits for "done". Gives up after `timeout`.
template <typename OnRemote>
Result serve(uint16_t port, const PingpongDest& local, Nanos timeout, OnRemote&& on_remote);

// The client side: connects to host:port (retrying until `timeout`, since the
// server may not be listening yet), sends `local`, reads the server's record
// and sends "done".
Result connect(const std::string& host, uint16_t port, const PingpongDest& local, Nanos timeout);

// Connects to host:port over TCP, retrying until `timeout` since the server
// may not be listening yet. Returns the socket, or -1 with `error` set.
int tcp_connect(const std::string& host, uint16_t port, Nanos timeout, std::string& error);


// `rocemu perf`'s exchange between its two processes: newline-terminated text
// lines over one TCP connection. Waits call `idle` between polls of the
// socket so a single-threaded NIC keeps answering ARP and ACKing meanwhile.
class LineConn {
public:
    // The longest line a peer may send (rocemu perf's lines are a few hundred
    // bytes); more without a newline fails the connection.
    static constexpr size_t kMaxLine = 64 * 1024;

    explicit LineConn(int fd) : fd_(fd) {}
    ~LineConn();
    LineConn(const LineConn&) = delete;
    LineConn& operator=(const LineConn&) = delete;

    // Sends `line` and a newline.
    bool send(const std::string& line, std::string& error);
    // 1: a line was read into `line`; 0: none complete yet; -1: the peer
    // closed the connection, it failed, or the peer sent more than kMaxLine
    // bytes without a newline (`error` says which).
    int try_recv(std::string& line, std::string& error);
    // Waits up to `timeout` for a line, calling idle() between attempts.
    template <typename Idle>
    bool recv(std::string& line, Nanos timeout, std::string& error, Idle&& idle) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout.v);
        for (;;) {
            const int r = try_recv(line, error);
            if (r != 0) return r > 0;
            if (std::chrono::steady_clock::now() >= deadline) {
                error = fmt_timeout(timeout);
                return false;
            }
            idle();
        }
    }

private:
    static std::string fmt_timeout(Nanos timeout);
    int fd_;
    std::string buf_;
};

// The server side: listens on `port` (all addresses) and accepts one client
// within `timeout`. nullptr and `error` if none came.
std::unique_ptr<LineConn> accept_lines(uint16_t port, Nanos timeout, std::string& error);
// The client side: connects to host:port, retrying until `timeout`.
std::unique_ptr<LineConn> connect_lines(const std::string& host, uint16_t port, Nanos timeout, std::string& error);

namespace detail {
int listen_and_accept(uint16_t port, Nanos timeout, std::string& error);
bool read_exact(int fd, char* buf, size_t len, Nanos timeout, std::string& error, bool allow_short = false);
bool write_all(int fd, const char* buf, size_t len, std::string& error);
void close_fd(int fd);
}  // namespace detail

template <typename OnRemote>
Result serve(uint16_t port, const PingpongDest& local, Nanos timeout, OnRemote&& on_remote) {
    Result r;
    const int fd = detail::listen_and_accept(port, timeout, r.error);
    if (fd < 0) return r;
    char buf[kRecordLen];
    if (!detail::read_exact(fd, buf, kRecordLen, timeout, r.error)) {
        detail::close_fd(fd);
        return r;
    }
    auto remote = parse_record(buf, kRecordLen);
    if (!remote) {
        r.error = "malformed address record from the client";
        detail::close_fd(fd);
        return r;
    }
    if (std::string err = on_remote(*remote); !err.empty()) {
        r.error = err;
        detail::close_fd(fd);
        return r;
    }
    const auto rec = format_record(local);
    char done[5];
    if (detail::write_all(fd, rec.data(), rec.size(), r.error) &&
        detail::read_exact(fd, done, sizeof done, timeout, r.error, true))
        r.remote = remote;
    detail::close_fd(fd);
    return r;
}

}  // namespace rocemu::oob
