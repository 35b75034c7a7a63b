// Human-readable one-line descriptions of frames, as `rocemu pcap` prints them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/units.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {

std::string format_ip(const IpAddr& a);
std::string format_mac(const MacAddr& m);

// One line for a RoCEv2 frame: addresses, UDP source port, opcode, QPN, PSN,
// flags (A AckReq, S SE, F FECN, B BECN), extended headers' key fields,
// payload length and the parse/ICRC verdict.
std::string describe_roce(const RocePacket& p, ParseError verdict);

// A short line for any frame that is not RoCEv2 (ARP, PFC, other IP, ...).
std::string describe_other(std::span<const uint8_t> frame);

}  // namespace rocemu::wire
