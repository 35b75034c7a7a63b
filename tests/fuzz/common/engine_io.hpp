// What the transport fuzz targets do around an Engine: pull every frame it
// has to send, drain a CQ, and build a packet from the peer to a local QP.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
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

// 16 tx_burst buffers of Engine::kMinTxBuf bytes, made once per process:
// targets that build a fresh engine per input spent a tenth of their time
// allocating and clearing these.
inline std::vector<std::vector<uint8_t>>& tx_buffers() {
    static auto* bufs = new std::vector<std::vector<uint8_t>>(16, std::vector<uint8_t>(transport::Engine::kMinTxBuf));
    return *bufs;
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

// Fills n <= 8192 bytes with a pattern that differs at every offset and
// with every seed, by memcpy: a byte loop under coverage instrumentation
// took a fifth of a run's time.
inline void fill_pattern(uint8_t* dst, size_t n, uint8_t seed) {
    static const auto table = [] {
        std::array<uint8_t, 8192 + 256> t{};
        for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>(i * 7 + (i >> 8) * 13);
        return t;
    }();
    std::memcpy(dst, table.data() + seed, std::min<size_t>(n, 8192));
}

}  // namespace rocemu::fuzz
