// What one emulated NIC is set up with beyond its host identity: congestion
// control (DCQCN as on ConnectX, or none), whether it sends CNPs, the PFC
// priority its RoCE traffic uses, PFC generated from its receive backlog, and
// two lab knobs that make congestion without a switch. Pure data: the NIC
// commands fill it from their options (tools/rocemu/nic_cli.hpp), verbs
// devices and EngineUpper read it.
#pragma once

#include <cstdint>
#include <optional>

#include "cc/config.hpp"
#include "common/units.hpp"

namespace rocemu::dpdk {

struct NicProfile {
    cc::CcConfig cc;              // --cc, --cc-preset, --nic-profile; DCQCN with ConnectX defaults
    bool send_cnp = true;         // false with --no-cnp: the peer (e.g. Linux rxe) drops CNPs
    int pfc_priority = 3;         // the PFC priority of all RoCE traffic (SONiC's and mlx5's lossless class)
    BitsPerSec port_speed = BitsPerSec::gbps(100);  // DCQCN's line rate and PFC's quanta unit
    uint32_t pfc_rx_xoff = 0;     // --pfc-rx-xoff: frames of receive backlog that pause the peer; 0: off
    uint32_t pfc_rx_xon = 0;      // --pfc-rx-xon: the pause is lifted below this
    uint16_t pfc_pause_quanta = 0xFFFF;  // --pfc-pause-quanta: pause time of each XOFF, 512 bit times each
    uint32_t pfc_refresh_percent = 50;   // --pfc-refresh-percent: XOFF sent again after this share of it
    uint32_t mark_ce_every = 0;   // --mark-ce-every: every Nth ECN-capable RoCEv2 frame received is marked CE
    uint64_t rx_max_pps = 0;      // --rx-max-pps: received frames handled per second at most; 0: no limit
    Nanos tx_timeout = Nanos::from_s(1);  // --tx-timeout-ms: the TX watchdog (NicConfig::tx_timeout); 0: never
    // The responder merges ACKs that have not left yet, as ConnectX does:
    // the loop handles a whole receive burst before it pulls, so a burst of
    // single-packet WRITEs is answered by one cumulative ACK, not one each.
    // Linux rxe completes every WQE an ACK covers, so it takes them too.
    bool coalesce_acks = true;
    // --zero-copy-min: request payload of at least this many bytes (and at
    // least 512, the engine's fused copy) is sent from the MR's pages, not
    // copied into the frame, on a port that takes chains
    // (Port::takes_chains); 0: always copied. Unset: the port's default
    // (Port::zero_copy_default).
    std::optional<uint32_t> zero_copy_min;

    // Responder QPs send CNPs for CE-marked packets.
    bool cnp_enabled() const { return send_cnp && cc.algorithm != cc::CcAlgorithm::kNone; }
};

}  // namespace rocemu::dpdk
