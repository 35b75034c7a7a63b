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

// Everything a packet, a PFC frame, a dequeue or a timer can change in a
// switch, compared field by field between two switches of one config (use
// under ASSERT_NO_FATAL_FAILURE). The count of fast-path admissions is left
// out: it is what differs between a switch with admit_run and one without.
inline void expect_same_switch_state(const Switch& a, const Switch& b, Nanos now) {
    const Mmu& ma = a.mmu();
    const Mmu& mb = b.mmu();
    ASSERT_EQ(a.num_ports(), b.num_ports());
    ASSERT_EQ(ma.pool_used(), mb.pool_used());
    for (std::size_t p = 0; p < a.num_ports(); ++p) {
        const PortId port = static_cast<PortId>(p);
        SCOPED_TRACE(::testing::Message() << "port " << p);
        ASSERT_EQ(ma.port_bytes(port), mb.port_bytes(port));
        ASSERT_EQ(a.tx_free_at(port), b.tx_free_at(port));
        const PortCounters ca = a.port_counters(port);
        const PortCounters cb = b.port_counters(port);
        ASSERT_EQ(ca.rx_pkts, cb.rx_pkts);
        ASSERT_EQ(ca.rx_bytes, cb.rx_bytes);
        ASSERT_EQ(ca.tx_pkts, cb.tx_pkts);
        ASSERT_EQ(ca.tx_bytes, cb.tx_bytes);
        ASSERT_EQ(ca.drops, cb.drops);
        ASSERT_EQ(ca.pfc_rx, cb.pfc_rx);
        ASSERT_EQ(ca.pfc_tx_xoff, cb.pfc_tx_xoff);
        ASSERT_EQ(ca.pfc_tx_xon, cb.pfc_tx_xon);
        for (int i = 0; i < kNumTc; ++i) {
            SCOPED_TRACE(::testing::Message() << "pg / queue " << i);
            ASSERT_EQ(ma.pg_reserved(port, i), mb.pg_reserved(port, i));
            ASSERT_EQ(ma.pg_shared(port, i), mb.pg_shared(port, i));
            ASSERT_EQ(ma.pg_headroom(port, i), mb.pg_headroom(port, i));
            ASSERT_EQ(ma.xoff(port, i), mb.xoff(port, i));
            ASSERT_EQ(ma.queue_bytes(port, i), mb.queue_bytes(port, i));
            ASSERT_EQ(a.queue_packets(port, i), b.queue_packets(port, i));
            ASSERT_EQ(a.queue_paused(port, i, now), b.queue_paused(port, i, now));
            ASSERT_EQ(a.watchdog_storm(port, i), b.watchdog_storm(port, i));
            const QueueCounters qa = a.queue_counters(port, i);
            const QueueCounters qb = b.queue_counters(port, i);
            ASSERT_EQ(qa.enq_pkts, qb.enq_pkts);
            ASSERT_EQ(qa.enq_bytes, qb.enq_bytes);
            ASSERT_EQ(qa.tx_pkts, qb.tx_pkts);
            ASSERT_EQ(qa.tx_bytes, qb.tx_bytes);
            ASSERT_EQ(qa.drops, qb.drops);
            ASSERT_EQ(qa.ecn_marks, qb.ecn_marks);
            ASSERT_EQ(qa.watermark, qb.watermark);
            ASSERT_EQ(qa.paused_time, qb.paused_time);
            ASSERT_EQ(qa.wd_storms, qb.wd_storms);
            ASSERT_EQ(qa.wd_restores, qb.wd_restores);
            ASSERT_EQ(qa.wd_drops, qb.wd_drops);
        }
    }
    ASSERT_EQ(a.next_timer(), b.next_timer());
    ASSERT_EQ(a.effects_overflow(), b.effects_overflow());
    ASSERT_EQ(a.bad_port_drops(), b.bad_port_drops());
}

}  // namespace rocemu::sw::test
