// Vocabulary shared by the switch core, its MMU and its runtimes: the packet
// descriptor the runtime hands in, the effects the core writes back, and the
// drop reasons every drop is counted under.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/fixed_vec.hpp"
#include "common/units.hpp"

namespace rocemu::sw {

// Traffic classes, egress queues per port, priority groups and PFC priorities
// are all eight wide, as in 802.1Qbb.
inline constexpr int kNumTc = 8;
inline constexpr std::size_t kMaxPorts = 64;
// Preamble, SFD and minimum inter-frame gap: they occupy the wire but are not
// part of the frame length the runtime reports.
inline constexpr Bytes kWireOverhead{20};

using PortId = uint16_t;

enum class DropReason : uint8_t {
    BadPort,               // descriptor names a port the switch does not have
    NoRoute,               // no LPM entry for the destination
    NeighborMiss,          // destination is on a connected subnet but not resolved by ARP
    IngressPgLimit,        // lossy PG over its shared threshold
    SharedPoolFull,        // lossy packet and the shared pool is exhausted
    LosslessHeadroomFull,  // lossless PG overran its headroom: the headroom is too small
    MtuExceeded,           // frame longer than the egress port's MTU plus Ethernet and VLAN headers
    EgressQueueLimit,      // lossy egress queue over its threshold (tail drop)
    NoDescriptor,          // descriptor pool empty: only frames under 60 bytes can cause it
    WredDrop,              // RED decided to drop (non-ECT, or ECN disabled)
    PfcWatchdog,           // queue is in a PFC storm with action drop
    kCount
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(DropReason::kCount)> kDropReasonNames{
    "bad_port",   "no_route",           "neighbor_miss",  "ingress_pg_limit", "shared_pool_full",
    "lossless_headroom_full", "mtu_exceeded", "egress_queue_limit", "no_descriptor", "wred_drop", "pfc_watchdog",
};

constexpr std::string_view drop_reason_name(DropReason r) { return kDropReasonNames[static_cast<std::size_t>(r)]; }

// IP ECN codepoints (low two bits of TOS / traffic class).
inline constexpr uint8_t kEcnNotEct = 0;
inline constexpr uint8_t kEcnCe = 3;

// ECMP hash inputs, combined as a bitmask.
enum HashField : uint8_t {
    kHashSrcIp = 1 << 0,
    kHashDstIp = 1 << 1,
    kHashProto = 1 << 2,
    kHashSrcPort = 1 << 3,
    kHashDstPort = 1 << 4,
    kHashInPort = 1 << 5,
};

// What the runtime tells the core about one received frame. The core never
// sees bytes; `handle` is the runtime's own reference (an mbuf index, a
// simulator packet id) and comes back unchanged in every effect.
struct PacketDesc {
    uint32_t handle = 0;
    Bytes frame_len{};  // Ethernet frame as stored, without preamble and IFG
    PortId in_port = 0;
    uint8_t dscp = 0;
    uint8_t ecn = kEcnNotEct;
    bool ipv6 = false;
    uint8_t ip_proto = 0;
    uint16_t src_port = 0;  // UDP source port: RoCEv2 flow entropy
    uint16_t dst_port = 0;
    uint32_t src_v4 = 0;  // host byte order
    uint32_t dst_v4 = 0;
    std::array<uint8_t, 16> src_v6{};
    std::array<uint8_t, 16> dst_v6{};
};

// One 802.1Qbb frame to send: bit i of class_enable covers priority i, and
// quanta[i] is its pause time (0 = resume).
struct PfcFrameDesc {
    uint8_t class_enable = 0;
    std::array<uint16_t, kNumTc> quanta{};
};

enum class EffectKind : uint8_t {
    Enqueued,         // handle accepted into (port, queue); neighbor says where to rewrite L2
    Drop,             // handle dropped for `reason`; the runtime frees it
    MarkCe,           // rewrite the IP ECN field of handle to CE (and the checksum)
    SendPfc,          // build and send `pfc` out of `port`, ahead of all data
    TxReady,          // `port` has a frame eligible to send at time `at`: call dequeue then
    WatchdogStorm,    // PFC watchdog detected a storm on (port, queue); log it
    WatchdogRestore,  // PFC watchdog restored (port, queue); log it
};

struct Effect {
    EffectKind kind = EffectKind::Drop;
    DropReason reason = DropReason::BadPort;
    uint8_t queue = 0;
    PortId port = 0;
    uint32_t handle = 0;
    uint32_t neighbor = 0;
    Nanos at{};
    PfcFrameDesc pfc{};
};

inline constexpr std::size_t kMaxEffects = 256;
using Effects = FixedVec<Effect, kMaxEffects>;

// A frame the port starts to transmit: it occupies the wire from `start` to
// `end` (serialisation including preamble and IFG).
struct TxDesc {
    uint32_t handle = 0;
    uint8_t queue = 0;
    Bytes frame_len{};
    Nanos start{};
    Nanos end{};
};

}  // namespace rocemu::sw
