// A deterministic packet-level model of N DCQCN senders sharing one
// 100 Gb/s bottleneck towards one receiver, in virtual time, to validate the
// cc/ cores (fairness, utilisation, queue depth, preset comparisons). Senders
// are paced by their reaction point, the receiver's notification point turns
// CE into CNPs, and CNPs reach the sender after a fixed delay.
//
// Two fabrics:
// - kMarkingQueue: one FIFO with the RED ramp (no mark at or below Kmin,
//   linear to Pmax at Kmax, always above) and one PFC pause covering all
//   senders (XOFF at pfc_xoff, XON at pfc_xon, each felt one link delay
//   later).
// - kSoftSwitch: the project's soft switch (switch/), SONiC defaults, data on
//   lossless DSCP 3 / queue 3 with WRED set to Kmin/Kmax/Pmax, its MMU
//   sending PFC per ingress port, which the senders honour. pfc_xoff/pfc_xon
//   are not used there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cc/config.hpp"
#include "common/units.hpp"

namespace rocemu::cc::sim {

enum class Fabric { kMarkingQueue, kSoftSwitch };

struct BottleneckConfig {
    CcConfig cc;
    Fabric fabric = Fabric::kMarkingQueue;
    int flows = 2;
    BitsPerSec link_rate = BitsPerSec::gbps(100);  // every link, bottleneck included
    Bytes packet_bytes{4096};                       // wire bytes per data packet
    Nanos link_delay = 1_us;                        // propagation per hop (sender-switch, switch-receiver)
    Nanos cnp_delay = 2_us;                         // receiver to sender for a CNP
    Nanos flow_start_gap = 0_us;                    // flow i starts at i * gap
    Bytes kmin{100 * 1024};
    Bytes kmax{400 * 1024};
    double pmax = 0.2;
    Bytes pfc_xoff{1024 * 1024};
    Bytes pfc_xon{1024 * 1024 - 64 * 1024};
    Nanos duration = 20_ms;
    Nanos sample_interval = 10_us;
    uint64_t seed = 1;
};

struct Sample {
    Nanos t;
    Bytes queue;
    std::vector<double> rate_gbps;        // each reaction point's current rate
    std::vector<double> throughput_gbps;  // delivered in the last sample interval
};

struct FlowStats {
    uint64_t delivered_bytes = 0;
    uint64_t cnps_received = 0;
    uint64_t rate_decreases = 0;
};

struct BottleneckResult {
    std::string error;  // non-empty if the fabric rejected its configuration
    std::vector<Sample> samples;
    std::vector<FlowStats> flows;
    uint64_t ce_marked = 0;
    uint64_t cnps_sent = 0;
    Bytes max_queue{0};
    Nanos time_above_pfc_xoff{0};   // kMarkingQueue only
    uint64_t pfc_pauses = 0;        // XOFFs sent to senders
    uint64_t fabric_drops = 0;      // packets the fabric dropped (lossless: should stay 0)
    Nanos last_xoff = Nanos::max();  // Nanos::max() if PFC never fired
    Nanos time_paused{0};  // summed over senders
};

class Bottleneck {
public:
    explicit Bottleneck(const BottleneckConfig& cfg) : cfg_(cfg) {}
    BottleneckResult run();

private:
    BottleneckResult run_marking_queue();
    BottleneckResult run_soft_switch();

    BottleneckConfig cfg_;
};

// Statistics over the samples in [from, to).
struct WindowStats {
    double jain = 0;           // Jain's fairness index of per-flow delivered throughput
    double utilisation = 0;    // delivered / (link rate x window)
    double mean_queue_bytes = 0;
    double max_queue_bytes = 0;
    double frac_in_band = 0;   // share of samples with Kmin <= queue <= Kmax
    double frac_above_kmax = 0;
};
WindowStats window_stats(const BottleneckConfig& cfg, const BottleneckResult& r, Nanos from, Nanos to);

double jain_index(const std::vector<double>& x);

// First time after which every `window` of delivered throughput has Jain's
// index >= jain_min and utilisation >= util_min; Nanos::max() if never.
Nanos convergence_time(const BottleneckConfig& cfg, const BottleneckResult& r, Nanos window, double jain_min,
                       double util_min);

// time_us, queue_kb, then rate and throughput per flow in Gb/s.
bool write_csv(const BottleneckResult& r, const std::string& path);

}  // namespace rocemu::cc::sim
