#include "cc/dcqcn_np.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace rocemu::cc {

std::string DcqcnNp::dump() const {
    return fmt::format("dcqcn np: ce {} cnp sent {} suppressed: interval {} peer {}", counters_.ce_packets,
                       counters_.cnp_sent, counters_.cnp_suppressed_interval, counters_.cnp_suppressed_peer);
}

void encode_cnp_transport(Qpn dest_qpn, std::span<uint8_t, kCnpTransportBytes> out) {
    std::fill(out.begin(), out.end(), uint8_t{0});
    out[0] = kCnpOpcode;
    out[2] = 0xFF;  // P_Key 0xFFFF, the default partition
    out[3] = 0xFF;
    out[4] = kBthBecn;
    out[5] = static_cast<uint8_t>(dest_qpn.v >> 16);
    out[6] = static_cast<uint8_t>(dest_qpn.v >> 8);
    out[7] = static_cast<uint8_t>(dest_qpn.v);
}

}  // namespace rocemu::cc
