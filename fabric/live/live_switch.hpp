// Switch `s` of a (scaled) Topology under the switch/dpdk runtime, as every
// live mode runs it: the topology's routes, one link per port at the port's
// speed and propagation delay, TTL decremented as in virtual time, and a
// seed derived from the run's so that one-process and split runs agree.
#pragma once

#include <memory>
#include <vector>

#include "dataplane/dpdk/port.hpp"
#include "fabric/topology.hpp"
#include "switch/dpdk/runtime.hpp"

namespace rocemu::fabric::live {

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

}  // namespace rocemu::fabric::live
