// A minimal deterministic packet-level model of N DCQCN senders sharing one
// bottleneck egress queue with RED/ECN marking, in virtual time. It exists to
// validate the cc/ cores (fairness, utilisation, queue depth, preset
// comparisons) without the full fabric: senders are paced by their reaction
// point, the queue marks CE per the RED ramp (no mark at or below Kmin,
// linear to Pmax at Kmax, always above), the receiver's notification point
// turns CE into CNPs, and CNPs reach the sender after a fixed delay.
// PFC is modelled as one pause covering all senders: the switch sends XOFF
// when the queue reaches pfc_xoff and XON when it drains to pfc_xon, and each
// takes effect at the senders one link delay later.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cc/config.hpp"
#include "common/units.hpp"

namespace rocemu::cc::sim {

struct BottleneckConfig {
    CcConfig cc;
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
    std::vector<Sample> samples;
    std::vector<FlowStats> flows;
    uint64_t ce_marked = 0;
    uint64_t cnps_sent = 0;
    Bytes max_queue{0};
    Nanos time_above_pfc_xoff{0};
    uint64_t pfc_pauses = 0;
    Nanos last_xoff = Nanos::max();  // Nanos::max() if PFC never fired
    Nanos time_paused{0};  // senders paused by PFC
};

class Bottleneck {
public:
    explicit Bottleneck(const BottleneckConfig& cfg) : cfg_(cfg) {}
    BottleneckResult run();

private:
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
