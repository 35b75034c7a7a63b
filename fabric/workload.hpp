// Collective-style traffic patterns turned into flows: N:1 incast,
// permutation, all-to-all, ring all-reduce and halving-doubling all-reduce,
// with the nccl-tests bus
// bandwidth factor of each, and a size sweep that reports nccl-tests'
// columns (size, time, algbw, busbw) plus PFC, ECN and CNP totals.
//
// Ring all-reduce is a flow per ring edge of 2(n-1) steps of size/n each
// (FlowSpec::steps, ::after = the predecessor's flow): on the RC model each
// step waits for the predecessor's previous step to have arrived (the data
// it forwards), as NCCL's ring does; the generator model streams the
// 2(n-1)/n x size at once. Rings follow rails
// (NIC i of host h sends to NIC i of host h+1), as NCCL builds one ring per
// rail.
//
// Halving-doubling all-reduce (Rabenseifner; n a power of two) is 2 log2(n)
// stages, a flow per rank and stage: the reduce-scatter sends size/2,
// size/4, ... size/n to the rank at distance 1, 2, ... n/2 (rank XOR
// distance), the all-gather sends size/n ... size/2 back at distance n/2 ...
// 1. On the RC model a rank's flow of stage s opens once its partner's flow
// of stage s-1 has arrived (FlowSpec::gate: the data it reduces and sends
// on; every stage's flow reports its arrival, FlowSpec::notify) and its own
// flow of stage s-1 has opened (FlowSpec::behind), not once ACKs are back.
// The same bytes as the ring in 2 log2(n) steps instead of 2(n-1): it pays
// fewer latencies and sends farther.
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

enum class Pattern : uint8_t { Incast, Permutation, AllToAll, RingAllReduce, HdAllReduce };
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

// Why the pattern cannot run at this size on this fabric (empty if it can):
// a size smaller than the ranks it is split over, a halving-doubling
// all-reduce over a rank count that is not a power of two.
std::string workload_problem(const Topology& topo, Pattern p, Bytes size);
// Ranks of a collective: hosts on a rail-optimised fabric (one ring or
// halving-doubling per rail), NICs otherwise.
uint32_t collective_ranks(const Topology& topo);
// nccl-tests' busbw / algbw for the pattern over n ranks.
double busbw_factor(Pattern p, uint32_t n);

// The largest message size a sweep takes (1 TiB): far beyond what a run
// finishes in, and far from where byte and bit counts would overflow.
inline constexpr Bytes kMaxSize{uint64_t{1} << 40};
// A message size as the command line gives it: digits with an optional K,
// M or G suffix (binary: 64K = 65536), from 1 B to kMaxSize; nullopt for
// anything else (no sign, no space, no digits beyond the range).
std::optional<Bytes> parse_size(std::string_view s);
// Sizes nccl-tests' -b, -e, -f and -i sweep: from `min` up to `max`, each
// `factor` times the one before when factor > 1, else `step` more. Empty,
// with `error` saying why, when min > max, factor <= 1 and step is 0, or
// there would be more than kMaxSweepSizes.
inline constexpr size_t kMaxSweepSizes = 128;
std::vector<Bytes> size_range(Bytes min, Bytes max, uint64_t factor, Bytes step, std::string& error);

}  // namespace rocemu::fabric
