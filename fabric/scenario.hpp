// The six scenarios of rocemu's playbook and the nccl-tests-style sweep.
// Each scenario runs a few variants of one fabric in virtual time, prints
// what it expects, a summary table and a verdict computed from the run, and
// can leave a report folder (CSV time series, gnuplot SVGs, pcaps).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/topology.hpp"
#include "fabric/workload.hpp"

namespace rocemu::fabric {

struct ScenarioOptions {
    uint64_t seed = 1;
    bool reduced = false;                // the CI size: fewer hosts, smaller messages
    std::string out_dir;                 // report folder; empty writes nothing
    std::string pcap_link;               // capture this link of every variant
    std::optional<FabricConfig> fabric;  // replaces the scenario's own fabric where one applies
    // Receives a progress line now and then (overwrite-style, no newline).
    std::function<void(const std::string&)> progress;
    // Polled while flows connect and every Fabric::kTickEvents events of a
    // run: true stops the run in progress (a user's Ctrl-C). run_sweep then
    // returns the sizes finished before it; run_scenario throws Interrupted.
    std::function<bool()> stop;
};

// A run stopped by ScenarioOptions::stop.
struct Interrupted : std::runtime_error {
    explicit Interrupted(const std::string& what) : std::runtime_error(what) {}
};

struct ScenarioResult {
    std::string name;
    std::string expectation;
    std::vector<std::vector<std::string>> table;  // header row first
    bool pass = false;
    std::string verdict;
    std::map<std::string, double> metrics;  // "<variant>.<metric>", for tests and scripts
    std::vector<std::string> files;         // report files written
    std::vector<std::string> log;           // watchdog events and similar
};

std::span<const std::string_view> scenario_names();
std::string_view scenario_description(std::string_view name);
// Whether the scenario runs on ScenarioOptions::fabric when one is given
// (ecmp, incast, dcqcn); the others keep the fabric they are about.
bool scenario_takes_fabric(std::string_view name);
// Throws std::invalid_argument for an unknown name or a fabric that does not
// fit the scenario.
ScenarioResult run_scenario(std::string_view name, const ScenarioOptions& opts);

// Where flow hashing put the flows of a run in which each flow kept one path
// (ECMP: no spraying, no adaptive routing) and every flow leaves its leaf
// towards one other leaf (the ecmp scenario's shift): read off the bytes each
// leaf's uplinks carried (`link_tx_bytes`, per topology link a->b and b->a),
// whole flows per uplink. `fair_share` is the effective bandwidth fair
// shares on those uplinks would give, each flow min(1, uplink speed / host
// speed / flows on its uplink) of its host link, over what a balanced fabric
// gives (the host link, or 1 / oversubscription of it): what the collisions
// alone cost, before any congestion control; `flows` is what the per-uplink
// counts add up to (the run's flow count when the reading is sound).
struct EcmpPlacement {
    std::vector<std::vector<uint32_t>> per_leaf;  // [leaf][uplink, in link order]: flows
    uint32_t flows = 0;
    double fair_share = 0;
};
EcmpPlacement ecmp_placement(const Topology& t, const std::vector<std::array<uint64_t, 2>>& link_tx_bytes,
                             uint32_t flows);

// nccl-tests style: one run per size, each a fresh fabric.
struct SweepRow {
    Bytes size{};
    Nanos time{};
    double algbw_gbs = 0;  // GB/s, as nccl-tests prints
    double busbw_gbs = 0;
    uint64_t pfc = 0, ecn = 0, cnp = 0;
    uint64_t drops = 0;
    std::vector<DropCount> drop_causes;  // `drops` by cause
    // Responses RC requesters ignored (late duplicate ACKs of a spraying
    // fabric: drop_ghost_response, drop_stale_response): nothing was lost,
    // so not in `drops`.
    uint64_t ignored_responses = 0;
    std::vector<DropCount> ignored_causes;
    // Flows whose last byte had not arrived when the run reached its
    // simulated-time limit (`limit`): then time is the limit and algbw and
    // busbw are 0, not a rate of bytes that never arrived.
    uint32_t unfinished = 0;
    uint32_t flows = 0;
    Nanos limit{};
};
// The simulated-time limit of a sweep's run and its sampling period: at least
// 1 s and 50 us, and for sizes whose busiest NIC needs longer at line rate
// than 100 ms, 10 times that time and a 200th of it (64 GiB ring all-reduce
// on 100G: 90 s, 45 ms).
struct SweepLimits {
    Nanos limit;
    Nanos sample_every;
    Nanos at_line_rate;  // the busiest NIC's payload bytes at the host line rate
};
SweepLimits sweep_limits(const Topology& topo, std::span<const FlowSpec> flows);
// `files` (if set) receives the report files the sweep wrote. With an
// out_dir, <workload>_sweep.csv holds the rows (the table's columns, then
// the drops by cause), rewritten after each size, so a stopped or killed
// sweep keeps the sizes it finished. A sweep stopped by opts.stop returns
// the rows of the sizes before the one it stopped in.
std::vector<SweepRow> run_sweep(const Topology& topo, Pattern p, std::span<const Bytes> sizes,
                                const ScenarioOptions& opts, std::vector<std::string>* files = nullptr);
std::string format_sweep(Pattern p, std::span<const SweepRow> rows);

}  // namespace rocemu::fabric
