// The RoCEv2 wire layer: one include for opcodes, header views, packets,
// L2 frames (Ethernet, 802.1Q, ARP, PFC), the ICRC and per-QP header templates.
#pragma once

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/header_template.hpp"
#include "dataplane/wire/headers.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/l2.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"
