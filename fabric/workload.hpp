// Collective-style traffic patterns turned into flows: N:1 incast,
// permutation, all-to-all and ring all-reduce, with the nccl-tests bus
// bandwidth factor of each, and a size sweep that reports nccl-tests'
// columns (size, time, algbw, busbw) plus PFC, ECN and CNP totals.
//
// Ring all-reduce is a flow per ring edge of 2(n-1) steps of size/n each
// (FlowSpec::steps, ::after = the predecessor's flow): on the RC model each
// step waits for this rank's previous step and its predecessor's; the
// generator model streams the 2(n-1)/n x size at once. Rings follow rails
// (NIC i of host h sends to NIC i of host h+1), as NCCL builds one ring per
// rail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.hpp"
#include "fabric/gen_nic.hpp"
#include "fabric/topology.hpp"

namespace rocemu::fabric {

enum class Pattern : uint8_t { Incast, Permutation, AllToAll, RingAllReduce };
std::string_view pattern_name(Pattern p);
std::optional<Pattern> parse_pattern(std::string_view name);

struct Workload {
    Pattern pattern = Pattern::RingAllReduce;
    Bytes size{1 << 20};          // per rank (the collective's buffer size)
    uint32_t incast_target = 0;   // NIC index
    uint32_t incast_senders = 0;  // 0: every other NIC
    Nanos start{};
};

// Flows for one run, to be added to an empty Fabric in order (`after`
// holds indices into the returned list). Each flow's UDP source port (its ECMP entropy) is drawn
// from `rng`, as a QP's port would be.
std::vector<FlowSpec> make_flows(const Topology& topo, const Workload& w, Rng& rng);

// nccl-tests' busbw / algbw for the pattern over n ranks.
double busbw_factor(Pattern p, uint32_t n);

}  // namespace rocemu::fabric
