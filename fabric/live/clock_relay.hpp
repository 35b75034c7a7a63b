// The fabric clock between machines (`--clock fabric`). On one machine the
// nodes of a split fabric share their clock through a file (SharedClock);
// across machines the hosts node and each switch node on another machine
// tell each other, over UDP on the switch's control address (the port of
// its --control-listen), the least fabric time of their own machine's
// nodes. Each side writes what it last heard into its slot of remote time
// in its machine's clock file, so every node there stays within the lead of
// the slowest node of the whole fabric as last heard: a node descheduled on
// one machine slows the others down too, and a rate sampled on the hosts
// node's clock is one the links carried.
//
// The hosts node asks (kTime: its machine's least time, and for a switch
// whose machine it knows, the least time of the other machines it heard);
// a switch node answers each datagram (kReply: its machine's least time and
// which machine that is, its clock file's domain). The hosts node leaves a
// machine's own time out of what it tells that machine, so no machine waits
// for its own echo. Nothing is resent: the hosts side asks every exchange
// (half a FabricClock step apart), so a lost datagram only makes a view
// older.
//
// Machines start at different times and run on their own until they hear of
// each other. Until every peer has answered and the machines' times lie
// within `sync_within` of each other, the hosts side tells every machine
// (and its own) the latest time of all, so each machine behind jumps to it
// (FabricClock::kJumpSteps) instead of the one ahead waiting for it to
// catch up; from then on, the least time of the others.
// Free of DPDK.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/units.hpp"
#include "fabric/live/control.hpp"

namespace rocemu::fabric::live {

// One datagram, 40 bytes, little-endian: "RCLK", version 1, kind, 2 zero
// bytes, tag, seq, fabric, domain, time.
struct ClockDatagram {
    enum Kind : uint8_t { kTime = 1, kReply = 2 };
    Kind kind = kTime;
    uint32_t tag = 0;     // the hosts side's peer index, echoed in the reply
    uint32_t seq = 0;     // the hosts side's exchange, echoed in the reply (its round trip)
    uint64_t fabric = 0;  // clock_fabric_id() of the sender's fabric_identity()
    uint64_t domain = 0;  // the sender's machine (SharedClock::domain()); 0 in a kTime
    int64_t time = 0;     // least fabric time of the sender's side; Nanos::max().v: none takes part
};
inline constexpr size_t kClockDatagramBytes = 40;
std::array<uint8_t, kClockDatagramBytes> encode(const ClockDatagram& d);
// nullopt for anything but a whole datagram of version 1 and a known kind.
std::optional<ClockDatagram> decode_clock_datagram(std::span<const uint8_t> bytes);
// FNV-1a of fabric_identity(): a relay takes datagrams of its own fabric only.
uint64_t clock_fabric_id(const std::string& identity);

class ClockRelay {
public:
    // The hosts node's side: exchanges with the switch nodes at `peers`
    // (their control addresses). nullptr and `error` if it cannot.
    static std::unique_ptr<ClockRelay> to_switches(std::vector<HostPort> peers, uint64_t fabric, Nanos sync_within,
                                                   std::string& error);
    // A switch node's side: answers on UDP `at`.
    static std::unique_ptr<ClockRelay> for_hosts(const HostPort& at, uint64_t fabric, std::string& error);
    // The hosts side tells the switch nodes it heard that its machine takes
    // no part any more, so they stop waiting for it.
    ~ClockRelay();
    ClockRelay(const ClockRelay&) = delete;
    ClockRelay& operator=(const ClockRelay&) = delete;

    // This machine (SharedClock::domain()); set before the first exchange.
    void set_domain(uint64_t d) { domain_ = d; }
    // One exchange at real time `real` (a monotonic clock): takes what has
    // arrived, answers it (switch side) or asks every peer (hosts side)
    // with `local`, this machine's least fabric time (Nanos::max(): none
    // takes part). Returns the least fabric time of the other machines as
    // last heard; Nanos::max() when none.
    Nanos exchange(Nanos local, Nanos real);

    // The UDP port it sends from (hosts side) or answers on.
    uint16_t port() const;
    // Hosts side: whether peer `i` (of `peers`) has answered.
    bool heard(size_t i) const { return i < peers_.size() && peers_[i].heard; }
    // Hosts side: every peer answered and the machines' times came within
    // `sync_within` of each other (before, each is told the latest time).
    bool synced() const { return synced_; }
    // Datagrams sent (hosts side: questions, one per peer an exchange;
    // switch side: answers, one an exchange to the latest question) and
    // taken (answers; questions).
    uint64_t sent() const { return sent_; }
    uint64_t received() const { return received_; }
    // Datagrams not of this fabric, of the wrong kind or tag, or malformed.
    uint64_t ignored() const { return ignored_; }

    // Hosts side: how long peer `i` took from a question to the answer to
    // it, in real time (the network both ways plus the switch node's wait
    // for its next exchange; not timed when taken after a gap of more than
    // `sync_within` since this side's previous exchange). A node may run
    // the lead past the other machines' time as it was a round trip ago, so
    // round trips longer than the lead slow the fabric down.
    struct RoundTrips {
        uint64_t count = 0;
        Nanos min = Nanos::max(), max{};
        // The smallest bucket bound that `share` of them (0-1) lie within.
        Nanos within(double share) const;
        void add(Nanos rtt);

        // 1 us buckets below 64 us, then 16 a power of two up to 2^30 us.
        static constexpr size_t kBuckets = 64 + 16 * 25;
        static size_t bucket(Nanos rtt);
        static Nanos upper(size_t bucket);
        std::array<uint64_t, kBuckets> n{};
    };
    const RoundTrips& round_trips(size_t i) const { return peers_.at(i).rtt; }

private:
    struct Peer {
        HostPort at;
        sockaddr_in addr{};
        bool heard = false;
        uint64_t domain = 0;
        Nanos time = Nanos::max();
        RoundTrips rtt;
    };
    ClockRelay(int fd, uint64_t fabric) : fd_(fd), fabric_(fabric) {}
    void send_to(const sockaddr_in& to, const ClockDatagram& d);
    void take(Nanos local, Nanos real);

    int fd_ = -1;
    uint64_t fabric_ = 0;
    uint64_t domain_ = 0;
    bool hosts_side_ = false;
    std::vector<Peer> peers_;
    Nanos sync_within_{};
    bool synced_ = false;
    Nanos heard_time_ = Nanos::max();  // switch side: what the hosts side said last
    // Hosts side: when each of the last kAsked exchanges asked (by seq).
    static constexpr uint32_t kAsked = 4096;
    uint32_t seq_ = 0;
    Nanos last_exchange_{};
    std::array<std::pair<uint32_t, Nanos>, kAsked> asked_{};
    uint64_t sent_ = 0, received_ = 0, ignored_ = 0;
};

}  // namespace rocemu::fabric::live
