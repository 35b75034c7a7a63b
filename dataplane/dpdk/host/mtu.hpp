// The active RDMA path MTU of a port, derived from its Ethernet MTU as Linux
// rxe does: the largest IBTA MTU that fits with room for the RoCEv2 headers.
#pragma once

#include "common/units.hpp"

namespace rocemu::host {

// Room rxe leaves for IP, UDP, BTH, the largest extended header and ICRC.
inline constexpr Bytes kRoceHeaderAllowance{80};

// 256, 512, 1024, 2048 or 4096: the largest that fits in (port MTU - 80);
// 256 when even that does not fit, as rxe falls back to IB_MTU_256.
constexpr Bytes active_mtu(Bytes port_mtu) {
    for (uint64_t m = 4096; m > 256; m /= 2)
        if (port_mtu.v >= m + kRoceHeaderAllowance.v) return Bytes{m};
    return Bytes{256};
}

}  // namespace rocemu::host
