// Congestion-control configuration: the DCQCN knobs of a ConnectX NIC under
// their firmware names, parsed and validated once into a const struct.
// Accepted spellings, units and ranges are listed in cc/README.md.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/units.hpp"

namespace rocemu::cc {

using namespace rocemu::literals;

enum class CcAlgorithm { kNone, kDcqcn };

// rpg_byte_reset counts 64-byte units on every spelling. NVIDIA's tables give
// no unit; 64 B is inferred (cc/README.md): read as bytes, the default 32767
// fires every 2.6 us at 100 Gb/s, faster than rate_reduce_monitor_period, and
// the model becomes unstable and unfair at default settings.
inline constexpr uint64_t kByteResetUnit = 64;

// Field defaults are the ConnectX firmware defaults (REFERENCE.md section 4);
// the connectx-default preset must parse to exactly this value.
struct DcqcnConfig {
    // Reaction point: rate increase.
    Nanos rpg_time_reset = 300_us;
    Bytes rpg_byte_reset{32767 * kByteResetUnit};  // 0 disables the byte counter
    bool byte_stages_enabled = true;
    uint32_t rpg_threshold = 1;
    BitsPerSec rpg_ai_rate = BitsPerSec::mbps(5);
    BitsPerSec rpg_hai_rate = BitsPerSec::mbps(50);
    BitsPerSec rpg_max_rate{0};  // 0 means the port's line rate
    bool clamp_tgt_rate = false;
    bool clamp_tgt_rate_after_time_inc = true;
    // Reaction point: rate decrease.
    uint32_t rpg_gd = 11;
    uint32_t rpg_min_dec_fac = 50;  // percent
    BitsPerSec rpg_min_rate = BitsPerSec::mbps(1);
    BitsPerSec rate_to_set_on_first_cnp{0};  // 0 disables
    Nanos rate_reduce_monitor_period = 4_us;
    // Reaction point: alpha, fixed point with 10 fractional bits.
    uint32_t dce_tcp_g = 1019;
    Nanos dce_tcp_rtt = 1_us;
    uint32_t initial_alpha_value = 1023;
    // Notification point.
    Nanos min_time_between_cnps = 2_us;
    uint8_t cnp_dscp = 48;
    uint8_t cnp_802p_prio = 6;

    bool operator==(const DcqcnConfig&) const = default;

    // The byte counter as the reaction point uses it (0 when disabled).
    Bytes effective_byte_reset() const { return byte_stages_enabled ? rpg_byte_reset : Bytes{0}; }
};

struct CcConfig {
    CcAlgorithm algorithm = CcAlgorithm::kDcqcn;
    DcqcnConfig dcqcn;
    // Carried for the transport (per-packet spraying); CC itself ignores it.
    bool adaptive_routing = false;

    bool operator==(const CcConfig&) const = default;
};

struct CcConfigResult {
    CcConfig config;
    std::string error;  // empty on success
    bool ok() const { return error.empty(); }
};

// A YAML mapping of knob -> value. `preset: <name>` is applied first, then the
// other keys in any order override it. Without a preset the base is
// connectx-default.
CcConfigResult parse_cc_config(std::string_view yaml_text);
CcConfigResult load_cc_config_file(const std::string& path);
// A preset compiled into the binary from configs/nic/<name>.yaml.
CcConfigResult load_cc_preset(std::string_view name);
std::span<const std::string_view> cc_preset_names();

std::string_view algorithm_name(CcAlgorithm a);

}  // namespace rocemu::cc
