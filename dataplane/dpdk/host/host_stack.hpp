// A NIC's host identity: the part of a RoCE NIC that is not RDMA. It answers
// ARP for its IPv4 address and neighbour solicitation for its IPv6 link-local
// address, replies to ICMP and ICMPv6 echo so `ping` works, resolves a
// QP's destination before RTR (ARP, or the MAC inside a link-local GID), fills
// in the L2/L3 fields of the QP's packets (VLAN and PCP, DSCP and ECN), and
// hands RoCEv2 and PFC frames on. It is I/O-free: frames and `now` come in,
// replies are written in place or emitted as effects.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/fixed_vec.hpp"
#include "common/units.hpp"
#include "dataplane/dpdk/host/arp_cache.hpp"
#include "dataplane/dpdk/host/gid.hpp"
#include "dataplane/dpdk/host/ipv4.hpp"
#include "dataplane/dpdk/host/ipv6.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::host {

struct HostConfig {
    wire::MacAddr mac;
    uint32_t ipv4 = 0;
    uint8_t prefix_len = 24;
    std::optional<uint32_t> gateway;
    std::optional<uint16_t> vlan;  // VID; frames are then tagged with `pcp`
    uint8_t pcp = 0;
    GidLayout gid_layout = GidLayout::ConnectX;
    Bytes port_mtu{1500};
    // ECN codepoint of data packets whose traffic class leaves the ECN bits 0.
    uint8_t ecn = wire::ecn::kEct0;
    ArpConfig arp;
};

// Why a frame was not taken. Every drop has one, and a counter.
enum class HostDrop : uint8_t {
    None,
    Truncated,
    WrongDstMac,
    WrongVlan,
    UnsupportedEthertype,
    ArpMalformed,
    ArpNotForUs,
    IpBadHeader,
    IpBadChecksum,
    IpNotForUs,
    IpFragment,
    IpProtoUnsupported,
    IcmpBadChecksum,
    IcmpUnsupported,
    RoceNotForUs,
    Ipv6Unsupported,  // IPv6 that is neither RoCEv2, echo nor neighbour solicitation
    EffectsFull,
    Chained,  // a frame in several segments that is not RoCEv2 (ARP, ICMP, PFC need one segment)
    kCount,
};
const char* to_string(HostDrop d);

enum class HostEvent : uint8_t {
    RxFrames,
    RxArpRequest,
    RxArpReply,
    TxArpRequest,
    TxArpReply,
    RxEchoRequest,
    TxEchoReply,
    TxEchoRequest,
    RxEchoReply,
    RxRoce,
    RxPfc,
    RxNeighborSolicit,
    TxNeighborAdvert,
    ArpResolved,
    ArpFailed,
    kCount,
};
const char* to_string(HostEvent e);

struct HostCounters {
    std::array<uint64_t, static_cast<size_t>(HostEvent::kCount)> events{};
    std::array<uint64_t, static_cast<size_t>(HostDrop::kCount)> drops{};
    uint64_t event(HostEvent e) const { return events[static_cast<size_t>(e)]; }
    uint64_t drop(HostDrop d) const { return drops[static_cast<size_t>(d)]; }
};

// Frames the stack originates (ARP requests, echo requests) are small.
inline constexpr size_t kHostFrameMax = 128;
inline constexpr size_t kEthMinFrame = 60;  // without FCS

struct HostEffect {
    enum class Kind : uint8_t {
        SendFrame,      // transmit frame[0, len)
        Resolved,       // the resolution queued under `cookie` completed: ip -> mac
        ResolveFailed,  // no ARP reply for `ip` after every probe
        EchoReply,      // an ICMP echo reply from `ip` arrived
    };
    Kind kind = Kind::SendFrame;
    uint16_t len = 0;
    uint32_t ip = 0;
    wire::MacAddr mac;
    uint64_t cookie = 0;
    uint16_t echo_id = 0, echo_seq = 0;
    std::array<uint8_t, kHostFrameMax> frame{};
};
using HostEffects = FixedVec<HostEffect, 32>;

enum class RxVerdict : uint8_t {
    Transport,  // RoCEv2 addressed to one of our GIDs: give it to the transport engine
    Pfc,        // PFC or PAUSE frame: give it to whatever paces transmission
    Reply,      // the frame was rewritten in place into a reply of reply_len bytes: send it
    Consumed,   // handled (ARP reply learned, echo reply reported)
    Drop,       // see `drop`
};
struct RxResult {
    RxVerdict verdict = RxVerdict::Drop;
    HostDrop drop = HostDrop::None;
    uint16_t reply_len = 0;
};

// What a QP's address vector says about its path (ibv_ah_attr's GRH).
struct AddressVector {
    wire::IpAddr dgid;
    uint8_t sgid_index = 0;
    uint8_t traffic_class = 0;  // DSCP in the top 6 bits, ECN in the low 2
    uint8_t hop_limit = 64;
    uint32_t flow_label = 0;
};

struct PathResult {
    enum class Status : uint8_t { Ready, Pending, Error };
    Status status = Status::Error;
    wire::L2 l2;  // ethertype set, addresses and tag filled in when Ready
    wire::L3 l3;
    std::string error;  // when Error: what is wrong and what to use instead
};

enum class PingStatus : uint8_t { Sent, Resolving, NoRoute, Busy };

class HostStack {
public:
    explicit HostStack(const HostConfig& cfg);

    const HostConfig& config() const { return cfg_; }
    const GidTable& gids() const { return gids_; }
    Bytes active_mtu() const { return active_mtu_; }
    const HostCounters& counters() const { return counters_; }
    const ArpCache& arp() const { return arp_; }

    // Classifies and handles one received frame. The frame may be rewritten in
    // place (verdict Reply); its buffer must stay valid only during the call.
    // `wire_len`: the whole frame's length when `frame` is the first segment
    // of a chain; only RoCEv2 (to the transport) is taken from a chain.
    RxResult on_frame(std::span<uint8_t> frame, Nanos now, HostEffects& fx, size_t wire_len = 0);

    // Probes and expiries of the ARP cache.
    void on_timer(Nanos now, HostEffects& fx);
    Nanos next_timer() const { return arp_.next_timer(); }

    // A gratuitous ARP so that peers and switches learn this MAC.
    void announce(HostEffects& fx);

    // The L2/L3 headers of a QP's packets. Pending means an ARP request went
    // out (or one was already on its way); a Resolved or ResolveFailed effect
    // with `cookie` follows, and the caller asks again.
    PathResult resolve_path(const AddressVector& av, Nanos now, uint64_t cookie, HostEffects& fx);

    // Sends an ICMP echo request with `payload_len` (<= 64) pattern bytes.
    // Resolving: ARP is under way, a Resolved effect with `cookie` follows.
    PingStatus ping(uint32_t dst, uint16_t id, uint16_t seq, size_t payload_len, Nanos now, uint64_t cookie,
                    HostEffects& fx);

private:
    RxResult handle_arp(std::span<uint8_t> frame, Nanos now, HostEffects& fx);
    RxResult handle_ipv4(std::span<uint8_t> frame, const wire::L2& l2, size_t l3_off, HostEffects& fx, size_t wire_len);
    RxResult handle_ipv6(std::span<uint8_t> frame, const wire::L2& l2, size_t l3_off, HostEffects& fx, size_t wire_len);
    RxResult drop(HostDrop d);
    void count(HostEvent e) { ++counters_.events[static_cast<size_t>(e)]; }
    HostEffect* emit(HostEffects& fx, HostEffect::Kind kind);
    wire::L2 our_l2(const wire::MacAddr& dst, uint16_t ethertype) const;
    void send_arp(uint16_t oper, const wire::MacAddr& dst, const wire::MacAddr& tha, uint32_t tpa,
                  HostEffects& fx);
    std::optional<uint32_t> next_hop(uint32_t dst) const;
    bool on_link(uint32_t dst) const;

    HostConfig cfg_;
    GidTable gids_;
    Bytes active_mtu_;
    ArpCache arp_;
    HostCounters counters_;
};

}  // namespace rocemu::host
