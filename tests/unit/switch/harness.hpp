// Shared fixtures for the switch tests: a small switch with one host per
// port, and packet descriptors for it.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "switch/switch.hpp"

namespace rocemu::sw::test {

inline constexpr uint8_t kDscpLossless3 = 3;  // TC3, lossless by default
inline constexpr uint8_t kDscpLossless4 = 4;
inline constexpr uint8_t kDscpTc0 = 8;
inline constexpr uint8_t kDscpTc1 = 0;
inline constexpr uint8_t kEcnEct0 = 2;

// 10.0.<port>.1 is the host attached to each port.
constexpr uint32_t host_ip(int port) { return (10u << 24) | (static_cast<uint32_t>(port) << 8) | 1u; }

struct Rig {
    explicit Rig(const SwitchConfig& cfg) : sw(std::make_unique<Switch>(cfg)) {
        for (std::size_t p = 0; p < cfg.ports.size(); ++p)
            host_nb.push_back(sw->routes().learn_host_v4(host_ip(static_cast<int>(p)), static_cast<PortId>(p),
                                                         {0x02, 0, 0, 0, 0, static_cast<uint8_t>(p)}));
    }

    PacketDesc pkt(PortId in, uint32_t dst, uint8_t dscp, uint32_t len = 1000, uint16_t sport = 0xC000,
                   uint8_t ecn = kEcnEct0) {
        PacketDesc d;
        d.handle = next_handle++;
        d.frame_len = Bytes{len};
        d.in_port = in;
        d.dscp = dscp;
        d.ecn = ecn;
        d.ip_proto = 17;
        d.src_port = sport;
        d.dst_port = 4791;
        d.src_v4 = host_ip(in);
        d.dst_v4 = dst;
        return d;
    }

    // Send one packet and return the effects it produced.
    Effects send(const PacketDesc& d, Nanos now) {
        Effects fx;
        sw->on_packet(d, now, rng, fx);
        return fx;
    }

    std::unique_ptr<Switch> sw;
    std::vector<uint32_t> host_nb;
    Rng rng{42};
    uint32_t next_handle = 1;
};

inline bool same_effect(const Effect& a, const Effect& b) {
    return a.kind == b.kind && a.reason == b.reason && a.queue == b.queue && a.port == b.port &&
           a.handle == b.handle && a.neighbor == b.neighbor && a.at == b.at &&
           a.pfc.class_enable == b.pfc.class_enable && a.pfc.quanta == b.pfc.quanta;
}

inline int count(const Effects& fx, EffectKind k) {
    int n = 0;
    for (const Effect& e : fx) n += e.kind == k;
    return n;
}

inline const Effect* find(const Effects& fx, EffectKind k) {
    for (const Effect& e : fx)
        if (e.kind == k) return &e;
    return nullptr;
}

// The egress port of the frame's Enqueued effect; -1 and a test failure if
// it was not enqueued.
inline int enqueued_port(const Effects& fx) {
    const Effect* e = find(fx, EffectKind::Enqueued);
    if (!e) {
        ADD_FAILURE() << "frame was not enqueued";
        return -1;
    }
    return e->port;
}

}  // namespace rocemu::sw::test
