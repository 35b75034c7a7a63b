// What the transport fuzz targets do around an Engine: pull every frame it
// has to send, drain a CQ, and build a packet from the peer to a local QP.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::fuzz {

// Calls f(frame) for every frame tx_burst hands out, in bursts of
// bufs.size() (each buffer at least Engine::kMinTxBuf bytes), until a burst
// comes back short.
template <typename F>
void drain_tx(transport::Engine& eng, std::vector<std::vector<uint8_t>>& bufs, Nanos now, transport::Effects& fx,
              F&& f) {
    transport::TxFrame tx[16];
    const size_t burst = std::min<size_t>(bufs.size(), 16);
    uint32_t n;
    do {
        for (size_t i = 0; i < burst; ++i) tx[i] = transport::TxFrame{.buf = bufs[i]};
        n = eng.tx_burst(std::span<transport::TxFrame>(tx, burst), now, fx);
        for (uint32_t i = 0; i < n; ++i) f(tx[i]);
    } while (n == burst);
}

// Calls f(wc) for every completion on the CQ until it is empty.
template <typename F>
void drain_cq(transport::Engine& eng, transport::CqHandle cq, F&& f) {
    transport::Wc wc[32];
    uint32_t n;
    while ((n = eng.poll_cq(cq, wc)) > 0)
        for (uint32_t i = 0; i < n; ++i) f(wc[i]);
}

// An IPv4 packet from the peer (MAC 02:00:00:00:00:01) to QP `qpn` of the
// engine with MAC `mac` and GID `local`; the caller sets opcode and fields.
inline wire::RocePacket from_peer(const wire::MacAddr& mac, const wire::IpAddr& local, const wire::IpAddr& peer,
                                  Qpn qpn) {
    wire::RocePacket p;
    p.l2.dst = mac;
    p.l2.src = wire::MacAddr{{2, 0, 0, 0, 0, 1}};
    p.l2.ethertype = 0x0800;
    p.l3.src = peer;
    p.l3.dst = local;
    p.bth.dqpn = qpn;
    return p;
}

}  // namespace rocemu::fuzz
