// The switch's configuration: SONiC-style keys parsed once from YAML into a
// validated const struct. Defaults follow SONiC's (AZURE templates).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/units.hpp"
#include "switch/link.hpp"
#include "switch/types.hpp"

namespace rocemu::sw {

struct PortConfig {
    std::string name;
    BitsPerSec speed = BitsPerSec::gbps(100);
    uint32_t mtu = 9100;
    Nanos propagation_delay{0};
};

// A buffer threshold: static (a byte limit) or dynamic (alpha = 2^dynamic_th
// times the free shared pool), as SONiC's `static_th` / `dynamic_th`.
struct Threshold {
    bool dynamic = true;
    int dynamic_th = 0;  // alpha = 2^dynamic_th, in [-7, 7]
    Bytes static_th{};
};

// BUFFER_PROFILE for a priority group. Lossless PGs use xon/xoff/xon_offset:
// xoff is the headroom that absorbs in-flight data after a pause is sent.
struct PgProfile {
    Bytes size{};  // reserved (guaranteed) bytes per PG
    Bytes xon{};
    Bytes xoff{};
    Bytes xon_offset{};
    Threshold th{};
};

// BUFFER_PROFILE for an egress queue.
struct QueueProfile {
    Bytes size{};
    Threshold th{};
};

enum class EcnMode : uint8_t { None, All };

// WRED_PROFILE, green colour only (the core does not colour packets).
struct WredProfile {
    bool wred_green_enable = false;  // RED-drop non-ECT packets
    EcnMode ecn = EcnMode::None;     // RED-mark ECT packets
    Bytes green_min_threshold{};     // Kmin
    Bytes green_max_threshold{};     // Kmax
    uint32_t green_drop_probability = 0;  // Pmax, percent
    bool active() const { return wred_green_enable || ecn != EcnMode::None; }
};

enum class WredStage : uint8_t { Enqueue, Dequeue };

struct SchedulerConfig {
    bool strict = false;  // STRICT, else DWRR
    uint32_t weight = 14;
};

enum class WdAction : uint8_t { Drop, Forward, Alert };
inline constexpr std::array<std::string_view, 3> kWdActionNames{"drop", "forward", "alert"};

struct PfcWdConfig {
    bool enabled = true;
    Nanos detection_time = Nanos::from_ms(200);
    Nanos restoration_time = Nanos::from_ms(200);
    WdAction action = WdAction::Drop;
};

enum class ArMode : uint8_t { Off, PerPacket, Flowlet };

struct RoutingConfig {
    uint8_t hash_fields = kHashSrcIp | kHashDstIp | kHashProto | kHashSrcPort | kHashDstPort;
    uint64_t hash_seed = 0;
    std::array<ArMode, kNumTc> adaptive{};  // per traffic class
    Nanos flowlet_gap = Nanos::from_us(50);
    uint32_t flowlet_table_size = 4096;  // power of two
};

struct SwitchConfig {
    // The fields every packet reads come first, in three lines (issue #8: a
    // fabric of 40 switches evicts a switch's config from L1 between two of
    // its packets, so each line a packet reads is a miss). Byte offsets as
    // placed at the start of a line (sw::Switch aligns it): 0 the lossless PG
    // profile, the pool and the TC-to-queue map; 64 the TC-to-PG map, PFC and
    // WRED stage, the lossy queue profile; 128 the DSCP map. A layout only:
    // no initializer depends on the order.
    PgProfile pg_lossless{};
    Bytes pool_size{};  // shared buffer, excluding reserved sizes and headroom
    std::array<uint8_t, kNumTc> tc_to_queue{};

    std::array<uint8_t, kNumTc> tc_to_pg{};
    uint8_t pfc_enable = 0;  // bit i: priority / PG i is lossless
    WredStage wred_stage = WredStage::Enqueue;
    uint16_t pause_quanta = 0xFFFF;  // pause time sent with XOFF
    uint32_t refresh_percent = 50;   // refresh XOFF after this share of the pause time
    QueueProfile queue_lossy{};      // lossless queues are bounded at ingress, by PFC
    std::vector<PortConfig> ports;

    std::array<uint8_t, 64> dscp_to_tc{};

    PgProfile pg_lossy{};
    std::array<SchedulerConfig, kNumTc> scheduler{};  // per queue
    std::array<WredProfile, kNumTc> wred{};           // per queue, same on every port
    PfcWdConfig pfc_wd{};
    RoutingConfig routing{};

    bool pg_lossless_at(int pg) const { return (pfc_enable >> pg) & 1; }
    // A queue is lossless when some lossless traffic class maps to it.
    bool queue_lossless_at(int q) const {
        for (int tc = 0; tc < kNumTc; ++tc)
            if (tc_to_queue[tc] == q && pg_lossless_at(tc_to_pg[tc])) return true;
        return false;
    }
};

// SONiC defaults for `nports` ports at `speed`: DSCP 3->3, 4->4, 46->5,
// 48->6, 8->0, else 1; PFC on 3,4; AZURE_LOSSLESS WRED on queues 3 and 4;
// DWRR weights 14/15; watchdog 200 ms drop.
SwitchConfig sonic_default_config(std::size_t nports, BitsPerSec speed);

// Empty when valid, else one message naming the key, the value and the range.
std::string validate(const SwitchConfig& cfg);

struct ConfigResult {
    std::optional<SwitchConfig> config;
    std::string error;
};

// Parse YAML text: keys absent from the text keep SONiC's defaults.
ConfigResult parse_switch_config(std::string_view yaml_text);
ConfigResult load_switch_config(const std::string& path);

struct LinkConfigResult {
    std::optional<LinkConfig> config;
    std::string error;
};

// One link's emulation and faults, as a YAML mapping (see
// configs/switch/link-faults.yaml); errors name LINK.<key>.
LinkConfigResult parse_link_config(std::string_view yaml_text);

}  // namespace rocemu::sw
