#include "fabric/live/clock_relay.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rocemu::fabric::live {

namespace {

constexpr uint8_t kMagic[4] = {'R', 'C', 'L', 'K'};
constexpr uint8_t kVersion = 1;
// Datagrams taken per exchange at most: the hosts side gets one reply per
// peer an exchange, a switch one question, but a node that was not
// scheduled for a while finds a backlog (what does not fit the socket's
// buffer is lost, which only makes the next view older).
constexpr int kTakeMax = 4096;

void put_le(uint8_t* p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

int udp_socket(std::string& error) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) error = fmt::format("fabric clock relay: socket: {}", std::strerror(errno));
    return fd;
}

}  // namespace

std::array<uint8_t, kClockDatagramBytes> encode(const ClockDatagram& d) {
    std::array<uint8_t, kClockDatagramBytes> b{};
    std::memcpy(b.data(), kMagic, 4);
    b[4] = kVersion;
    b[5] = d.kind;
    put_le(&b[8], d.tag, 4);
    put_le(&b[12], d.seq, 4);
    put_le(&b[16], d.fabric, 8);
    put_le(&b[24], d.domain, 8);
    put_le(&b[32], static_cast<uint64_t>(d.time), 8);
    return b;
}

std::optional<ClockDatagram> decode_clock_datagram(std::span<const uint8_t> b) {
    if (b.size() != kClockDatagramBytes || std::memcmp(b.data(), kMagic, 4) != 0 || b[4] != kVersion) return std::nullopt;
    if (b[5] != ClockDatagram::kTime && b[5] != ClockDatagram::kReply) return std::nullopt;
    ClockDatagram d;
    d.kind = static_cast<ClockDatagram::Kind>(b[5]);
    d.tag = static_cast<uint32_t>(get_le(&b[8], 4));
    d.seq = static_cast<uint32_t>(get_le(&b[12], 4));
    d.fabric = get_le(&b[16], 8);
    d.domain = get_le(&b[24], 8);
    d.time = static_cast<int64_t>(get_le(&b[32], 8));
    return d;
}

uint64_t clock_fabric_id(const std::string& identity) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char c : identity) {
        h ^= static_cast<uint8_t>(c);
        h *= 0x100000001b3ull;
    }
    return h;
}

std::unique_ptr<ClockRelay> ClockRelay::to_switches(std::vector<HostPort> peers, uint64_t fabric, Nanos sync_within,
                                                    std::string& error) {
    std::vector<Peer> ps;
    for (HostPort& at : peers) {
        Peer p;
        if (!resolve_ipv4(at, p.addr, error)) {
            error = fmt::format("fabric clock relay to {}: {}", format_host_port(at), error);
            return nullptr;
        }
        p.at = std::move(at);
        ps.push_back(std::move(p));
    }
    const int fd = udp_socket(error);
    if (fd < 0) return nullptr;
    std::unique_ptr<ClockRelay> r(new ClockRelay(fd, fabric));
    r->hosts_side_ = true;
    r->peers_ = std::move(ps);
    r->sync_within_ = sync_within;
    return r;
}

std::unique_ptr<ClockRelay> ClockRelay::for_hosts(const HostPort& at, uint64_t fabric, std::string& error) {
    sockaddr_in sa{};
    if (!resolve_ipv4(at, sa, error)) {
        error = fmt::format("fabric clock relay on {}: {}", format_host_port(at), error);
        return nullptr;
    }
    const int fd = udp_socket(error);
    if (fd < 0) return nullptr;
    if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
        error = fmt::format("fabric clock relay: cannot bind UDP {}: {}", format_host_port(at), std::strerror(errno));
        close(fd);
        return nullptr;
    }
    return std::unique_ptr<ClockRelay>(new ClockRelay(fd, fabric));
}

ClockRelay::~ClockRelay() {
    if (hosts_side_) {
        ClockDatagram d{ClockDatagram::kTime, 0, 0, fabric_, 0, Nanos::max().v};
        for (uint32_t i = 0; i < peers_.size(); ++i) {
            if (!peers_[i].heard) continue;
            d.tag = i;
            send_to(peers_[i].addr, d);
        }
    }
    close(fd_);
}

uint16_t ClockRelay::port() const {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    return getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0 ? ntohs(sa.sin_port) : 0;
}

void ClockRelay::send_to(const sockaddr_in& to, const ClockDatagram& d) {
    const std::array<uint8_t, kClockDatagramBytes> b = encode(d);
    // A full socket buffer or an unreachable peer loses this one; the next
    // exchange sends a newer time anyway.
    if (sendto(fd_, b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to),
               sizeof to) == static_cast<ssize_t>(b.size()))
        ++sent_;
}

void ClockRelay::take(Nanos local, Nanos real) {
    uint8_t buf[kClockDatagramBytes + 1];
    std::optional<std::pair<sockaddr_in, ClockDatagram>> ask;  // switch side: the latest question
    for (int i = 0; i < kTakeMax; ++i) {
        sockaddr_in from{};
        socklen_t len = sizeof from;
        const ssize_t n = recvfrom(fd_, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
        if (n < 0) break;  // nothing more (or an ICMP error of an earlier send: the peer is not up yet)
        const std::optional<ClockDatagram> d =
            decode_clock_datagram(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
        const ClockDatagram::Kind want = hosts_side_ ? ClockDatagram::kReply : ClockDatagram::kTime;
        if (!d || d->fabric != fabric_ || d->kind != want || (hosts_side_ && d->tag >= peers_.size()) ||
            len != sizeof from) {
            ++ignored_;
            continue;
        }
        ++received_;
        if (hosts_side_) {
            Peer& p = peers_[d->tag];
            p.heard = true;
            p.domain = d->domain;
            p.time = Nanos{d->time};
            // Timed only when this side was there to take it: after a gap
            // (a node descheduled, or busy between sizes), the time an
            // answer waited here is this side's, not the round trip's.
            if (const auto& [seq, at] = asked_[d->seq % kAsked];
                seq == d->seq && at <= real && real - last_exchange_ <= sync_within_)
                p.rtt.add(real - at);
        } else {
            heard_time_ = Nanos{d->time};
            ask.emplace(from, *d);
        }
    }
    // One answer, to the latest: older questions queued while this node
    // was not scheduled are answered by it.
    if (ask)
        send_to(ask->first,
                ClockDatagram{ClockDatagram::kReply, ask->second.tag, ask->second.seq, fabric_, domain_, local.v});
}

Nanos ClockRelay::exchange(Nanos local, Nanos real) {
    take(local, real);
    last_exchange_ = real;
    if (!hosts_side_) return heard_time_;
    ++seq_;
    asked_[seq_ % kAsked] = {seq_, real};
    if (!synced_) {
        bool all = true;
        Nanos lo = local, hi = local;
        for (const Peer& p : peers_) {
            all = all && p.heard;
            if (!p.heard || p.domain == domain_ || p.time == Nanos::max()) continue;
            lo = std::min(lo, p.time);
            hi = std::max(hi, p.time);
        }
        if (all && hi - lo <= sync_within_) {
            synced_ = true;
        } else {
            // Catching up: everyone, this machine too, goes on from the
            // latest time of all (a machine behind jumps to it).
            for (uint32_t i = 0; i < peers_.size(); ++i)
                send_to(peers_[i].addr, ClockDatagram{ClockDatagram::kTime, i, seq_, fabric_, 0, hi.v});
            return hi;
        }
    }
    Nanos view = Nanos::max();
    for (const Peer& p : peers_)
        if (p.heard && p.domain != domain_) view = std::min(view, p.time);
    for (uint32_t i = 0; i < peers_.size(); ++i) {
        // Its own machine's time left out: known once it has answered.
        Nanos t = local;
        for (const Peer& q : peers_)
            if (peers_[i].heard && q.heard && q.domain != peers_[i].domain && q.domain != domain_)
                t = std::min(t, q.time);
        send_to(peers_[i].addr, ClockDatagram{ClockDatagram::kTime, i, seq_, fabric_, 0, t.v});
    }
    return view;
}

size_t ClockRelay::RoundTrips::bucket(Nanos rtt) {
    const uint64_t us = static_cast<uint64_t>(std::max<int64_t>(rtt.v, 0)) / 1000;
    if (us < 64) return us;
    const int e = std::min(63 - __builtin_clzll(us), 30);  // 6..30
    const uint64_t sub = us >> 31 ? 15 : (us >> (e - 4)) & 15;
    return 64 + 16 * static_cast<size_t>(e - 6) + sub;
}

Nanos ClockRelay::RoundTrips::upper(size_t b) {
    if (b < 64) return Nanos::from_us(static_cast<int64_t>(b + 1));
    const int e = 6 + static_cast<int>((b - 64) / 16);
    const int64_t sub = static_cast<int64_t>((b - 64) % 16);
    return Nanos::from_us((16 + sub + 1) << (e - 4));
}

void ClockRelay::RoundTrips::add(Nanos rtt) {
    ++count;
    min = std::min(min, rtt);
    max = std::max(max, rtt);
    ++n[bucket(rtt)];
}

Nanos ClockRelay::RoundTrips::within(double share) const {
    const double want = share * static_cast<double>(count);
    uint64_t seen = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
        seen += n[b];
        if (seen > 0 && static_cast<double>(seen) >= want) return std::min(upper(b), max);
    }
    return max;
}

}  // namespace rocemu::fabric::live
