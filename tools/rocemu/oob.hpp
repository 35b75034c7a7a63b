// The out-of-band exchange of ibv_rc_pingpong and ibv_ud_pingpong (rdma-core
// libibverbs/examples): over TCP (port 18515 by default) each side sends one
// 52-byte record "LLLL:QQQQQQ:PPPPPP:GGGG...G\0" (LID, QPN, PSN in hex, GID as
// 32 hex digits in byte order), the client first; then the client sends
// "done\0". rocemu speaks it so it can pair with the real tools.
#pragma once

#include <array>
#include <cstdint>
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
