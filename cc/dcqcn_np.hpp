// DCQCN notification point (the receiver side): turns CE-marked arrivals into
// CNP requests, at most one per QP every min_time_between_cnps, and never to a
// peer that cannot take CNPs (Linux rxe drops them as an opcode/QP-type
// mismatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "cc/config.hpp"
#include "common/units.hpp"

namespace rocemu::cc {

// CNP wire constants (IBTA RoCEv2 annex): BTH opcode 0x81, BECN set in BTH
// byte 4, PSN 0, then 16 reserved zero bytes before the ICRC.
inline constexpr uint8_t kCnpOpcode = 0x81;
inline constexpr uint8_t kBthBecn = 0x40;
inline constexpr std::size_t kBthBytes = 12;
inline constexpr std::size_t kCnpReservedBytes = 16;
inline constexpr std::size_t kCnpTransportBytes = kBthBytes + kCnpReservedBytes;

// Per responder QP; lives in the caller's QP context.
struct NpQpState {
    Qpn remote_qpn;               // the sender's QP: the CNP's destination
    bool peer_accepts_cnp = true; // false for peers such as Linux rxe
    bool sent_any = false;
    Nanos last_cnp{0};
};

// What the responder must put on the wire: a CNP to `dest_qpn` with these
// IP DSCP and 802.1p priority values.
struct CnpRequest {
    Qpn dest_qpn;
    uint8_t dscp = 0;
    uint8_t pcp = 0;
};

struct NpCounters {
    uint64_t ce_packets = 0;
    uint64_t cnp_sent = 0;
    uint64_t cnp_suppressed_interval = 0;
    uint64_t cnp_suppressed_peer = 0;
};

class DcqcnNp {
public:
    explicit DcqcnNp(const DcqcnConfig& cfg) : cfg_(&cfg) {}

    // Called for every received data packet whose IP ECN field is CE.
    std::optional<CnpRequest> on_ce_packet(NpQpState& qp, Nanos now) {
        ++counters_.ce_packets;
        if (!qp.peer_accepts_cnp) {
            ++counters_.cnp_suppressed_peer;
            return std::nullopt;
        }
        if (qp.sent_any && now - qp.last_cnp < cfg_->min_time_between_cnps) {
            ++counters_.cnp_suppressed_interval;
            return std::nullopt;
        }
        qp.sent_any = true;
        qp.last_cnp = now;
        ++counters_.cnp_sent;
        return CnpRequest{qp.remote_qpn, cfg_->cnp_dscp, cfg_->cnp_802p_prio};
    }

    const NpCounters& counters() const { return counters_; }
    // One line of counters, for logs.
    std::string dump() const;

private:
    const DcqcnConfig* cfg_;
    NpCounters counters_;
};

// Writes the CNP's BTH and reserved bytes (everything between the UDP header
// and the ICRC).
void encode_cnp_transport(Qpn dest_qpn, std::span<uint8_t, kCnpTransportBytes> out);

}  // namespace rocemu::cc
