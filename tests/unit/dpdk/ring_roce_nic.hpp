// One emulated RDMA NIC with one RC QP on a side of a RingPair: port, host
// identity (MAC 02:00:00:00:00:<last>, IPv4 10.0.0.<last>/24), engine,
// EngineUpper and poll loop. Shared by the DPDK tests of the transport on
// the runtime.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/dpdk/roce_nic.hpp"

namespace rocemu::dpdk::test {

struct RingRoceNicOptions {
    std::optional<NicProfile> profile;  // none: EngineUpper without congestion control
    size_t buf = 8192;                  // one registered buffer
    uint32_t mbufs = 1023;
    uint32_t cqe = 256;
    uint32_t max_send_wr = 256;
    Nanos tx_drain = Nanos::from_us(100);
    Nanos arp_retransmit = Nanos::from_s(1);
};

struct RingRoceNic {
    RingRoceNicOptions opts;
    std::unique_ptr<Port> port;
    host::HostStack stack;
    std::unique_ptr<transport::Engine> engine;
    std::unique_ptr<EngineUpper> upper;
    std::unique_ptr<Nic<EngineUpper>> nic;
    transport::PdHandle pd;
    transport::CqHandle cq;
    Qpn qpn;
    std::vector<uint8_t> buf;
    transport::MrHandle mr;

    RingRoceNic(const RingPair& rings, int side, const std::string& name, uint8_t last, const TscClock& clock,
                const RingRoceNicOptions& o = {})
        : opts(o), stack(host(last, o.arp_retransmit)), buf(o.buf) {
        using namespace transport;
        PortConfig pc;
        pc.mbufs = o.mbufs;
        pc.min_frame_room = Engine::kMinTxBuf;
        std::string error;
        port = rings.port(side, name, pc, error);
        EXPECT_TRUE(port) << error;
        if (!port) return;
        const NicProfile profile = o.profile.value_or(NicProfile{});
        VerbsError e;
        engine = Engine::create(o.profile ? engine_config(stack, profile, *port) : engine_config(stack), e);
        EXPECT_FALSE(e) << e.msg;
        if (!engine) return;
        upper = o.profile ? std::make_unique<EngineUpper>(*engine, profile) : std::make_unique<EngineUpper>(*engine);
        NicConfig nc = nic_config(profile);
        nc.tx_drain = o.tx_drain;
        nic = std::make_unique<Nic<EngineUpper>>(*port, stack, *upper, clock, nullptr, nc);
        pd = engine->alloc_pd().value;
        cq = engine->create_cq(o.cqe).value;
        mr = engine->reg_mr(pd, buf.data(), buf.size(), kLocalWrite | kRemoteWrite | kRemoteRead).value;
        QpInitAttr ia;
        ia.pd = pd;
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.cap.max_send_wr = o.max_send_wr;
        ia.peer_accepts_cnp = o.profile && profile.cnp_enabled();
        const auto q = engine->create_qp(ia);
        EXPECT_TRUE(q.ok()) << q.error.msg;
        qpn = q.value;
    }

    static host::HostConfig host(uint8_t last, Nanos arp_retransmit) {
        host::HostConfig c;
        c.mac = wire::MacAddr{{0x02, 0, 0, 0, 0, last}};
        c.ipv4 = 0x0A000000u + last;
        c.prefix_len = 24;
        c.arp.retransmit_time = arp_retransmit;
        return c;
    }

    // One of the QP's counters as telemetry gets it; fails the test if absent.
    uint64_t qp_counter(const char* name) const {
        CounterQuery q;
        q.kind = CounterQuery::Kind::Qp;
        q.qpn = qpn.v;
        upper->answer(q);
        for (const auto& [n, v] : q.values)
            if (n == name) return v;
        ADD_FAILURE() << "no counter " << name;
        return 0;
    }
};

}  // namespace rocemu::dpdk::test
