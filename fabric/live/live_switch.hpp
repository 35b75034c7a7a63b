// Switch `s` of a (scaled) Topology under the switch/dpdk runtime, as every
// live mode runs it: the topology's routes, one link per port at the port's
// speed and propagation delay, TTL decremented as in virtual time, and a
// seed derived from the run's so that one-process and split runs agree.
#pragma once

#include <fmt/format.h>
#include <rte_ethdev.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/dpdk/port.hpp"
#include "fabric/topology.hpp"
#include "switch/dpdk/runtime.hpp"
#include "switch/dpdk/stats.hpp"

namespace rocemu::fabric::live {

// Gives ring port `id` (rte_eth_from_rings) the topology's port MAC, the
// source of every frame the switch sends from it. net_ring has no
// mac_addr_set: rte_eth_dev_default_mac_addr_set fails (ENOTSUP) and left the
// address 00:00:00:00:00:00, which a Linux bridge (and a real switch) drops as
// a source. Its one address slot is empty, so rte_eth_dev_mac_addr_add fills
// it. False with `error` set if the address did not stick.
inline bool set_ring_port_mac(uint16_t id, const std::array<uint8_t, 6>& mac, std::string& error) {
    rte_ether_addr a;
    std::memcpy(a.addr_bytes, mac.data(), 6);
    rte_ether_addr got{};
    const int rc = rte_eth_dev_mac_addr_add(id, &a, 0);
    rte_eth_macaddr_get(id, &got);
    if (rc == 0 && std::memcmp(got.addr_bytes, mac.data(), 6) == 0) return true;
    error = fmt::format("ring port {} does not take its MAC ({})", id, rc != 0 ? rte_strerror(-rc) : "not set");
    return false;
}

// `ports[i]` is switch port i; `core` was built from the switch's config.
inline std::unique_ptr<sw::live::SwitchRuntime> start_switch(const Topology& topo, uint32_t s, sw::Switch& core,
                                                             std::vector<dpdk::Port*> ports, uint64_t seed) {
    const SwitchSpec& spec = topo.switches[s];
    topo.install_routes(s, core.routes());
    std::vector<sw::LinkConfig> links;
    for (const sw::PortConfig& p : spec.cfg.ports) {
        sw::LinkConfig lc;
        lc.speed = p.speed;
        lc.propagation_delay = p.propagation_delay;
        links.push_back(lc);
    }
    sw::live::RuntimeOptions ro;
    ro.ttl_decrement = true;
    ro.seed = seed * 1000003u + s;
    return std::make_unique<sw::live::SwitchRuntime>(core, std::move(ports), std::move(links), nullptr, ro);
}

// A switch node's row for the paused time of the NIC MAC (NicWire) it runs
// on a port: "switch,port,nic_paused_ns,value".
inline constexpr std::string_view kNicPausedRow = "nic_paused_ns";

// Switch `s`'s counters as SWITCH,PORT,COUNTER,VALUE rows appended to
// `rows`: every nonzero port counter, and a lossless_drops row per port that
// had any (split.hpp's snapshot rows). `scratch` is port_counter_names()
// long.
inline void append_port_rows(const Topology& topo, uint32_t s, const sw::Switch& core,
                             const sw::live::SwitchRuntime& rt, Nanos now, std::vector<uint64_t>& scratch,
                             std::vector<std::string>& rows) {
    const SwitchSpec& spec = topo.switches[s];
    const auto& names = sw::live::port_counter_names();
    for (sw::PortId p = 0; p < rt.num_ports(); ++p) {
        const std::string& port = spec.cfg.ports[p].name;
        sw::live::collect_port_counters(core, p, now, rt.stats(p), rt.link(p).counters(), scratch);
        for (size_t i = 0; i < names.size(); ++i)
            if (scratch[i]) rows.push_back(fmt::format("{},{},{},{}", spec.name, port, names[i], scratch[i]));
        if (const uint64_t l = sw::live::lossless_drops(core, p))
            rows.push_back(fmt::format("{},{},lossless_drops,{}", spec.name, port, l));
    }
}

}  // namespace rocemu::fabric::live
