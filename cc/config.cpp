#include "cc/config.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "cc/presets.hpp"
#include "common/text_file.hpp"

namespace rocemu::cc {
namespace {

enum class Unit { kMicros, kMbps, kBytes64, kPercent, kFixed1024, kCount, kBool, kCode };

std::string_view unit_name(Unit u) {
    switch (u) {
        case Unit::kMicros: return " us";
        case Unit::kMbps: return " Mb/s";
        case Unit::kBytes64: return " x 64 bytes";
        case Unit::kPercent: return " %";
        case Unit::kFixed1024: return " /1024";
        case Unit::kCount:
        case Unit::kBool:
        case Unit::kCode: return "";
    }
    return "";
}

using Setter = void (*)(CcConfig&, uint64_t);

struct Knob {
    std::string_view name;                    // MLNX_OFED sysfs name, our canonical one
    std::array<std::string_view, 3> aliases;  // mlx5 debugfs, mlxconfig, tuning-guide names
    Unit unit;
    uint64_t min;
    uint64_t max;
    Setter set;
};

constexpr uint64_t kMaxMbps = 400000;
// Firmware allows 0..32767 units; up to 1 GiB is accepted so the paper's
// 10 MB byte counter can be expressed.
constexpr uint64_t kMaxByteResetUnits = (1ull << 30) / kByteResetUnit;
constexpr uint64_t kU32 = 0xFFFFFFFFull;

Nanos us(uint64_t v) { return Nanos{static_cast<int64_t>(v) * 1000}; }
BitsPerSec mbps(uint64_t v) { return BitsPerSec{v * 1000000}; }

// Ranges follow NVIDIA's DCQCN parameter reference where it gives one; where
// the emulator allows more cc/README.md says so.
const std::array<Knob, 21> kKnobs{{
    {"rpg_time_reset", {"rp_time_reset", "RPG_TIME_RESET", ""}, Unit::kMicros, 1, 131071,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_time_reset = us(v); }},
    {"rpg_byte_reset", {"rp_byte_reset", "RPG_BYTE_RESET", ""}, Unit::kBytes64, 0, kMaxByteResetUnits,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_byte_reset = Bytes{v * kByteResetUnit}; }},
    {"byte_stages_enabled", {"DCQCN_NI_BYTE_STAGES", "", ""}, Unit::kBool, 0, 1,
     [](CcConfig& c, uint64_t v) { c.dcqcn.byte_stages_enabled = v != 0; }},
    {"rpg_threshold", {"rp_threshold", "RPG_THRESHOLD", ""}, Unit::kCount, 1, 31,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_threshold = static_cast<uint32_t>(v); }},
    {"rpg_ai_rate", {"rp_ai_rate", "RPG_AI_RATE", ""}, Unit::kMbps, 1, kMaxMbps,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_ai_rate = mbps(v); }},
    {"rpg_hai_rate", {"rp_hai_rate", "RPG_HAI_RATE", ""}, Unit::kMbps, 1, kMaxMbps,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_hai_rate = mbps(v); }},
    {"rpg_max_rate", {"rp_max_rate", "RPG_MAX_RATE", ""}, Unit::kMbps, 0, kMaxMbps,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_max_rate = mbps(v); }},
    {"clamp_tgt_rate", {"rp_clamp_tgt_rate", "CLAMP_TGT_RATE", ""}, Unit::kBool, 0, 1,
     [](CcConfig& c, uint64_t v) { c.dcqcn.clamp_tgt_rate = v != 0; }},
    {"clamp_tgt_rate_after_time_inc", {"rp_clamp_tgt_rate_ati", "CLAMP_TGT_RATE_AFTER_TIME_INC", ""}, Unit::kBool, 0,
     1, [](CcConfig& c, uint64_t v) { c.dcqcn.clamp_tgt_rate_after_time_inc = v != 0; }},
    {"rpg_gd", {"rp_gd", "RPG_GD", ""}, Unit::kCount, 1, 15,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_gd = static_cast<uint32_t>(v); }},
    {"rpg_min_dec_fac", {"rp_min_dec_fac", "RPG_MIN_DEC_FAC", ""}, Unit::kPercent, 0, 100,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_min_dec_fac = static_cast<uint32_t>(v); }},
    {"rpg_min_rate", {"rp_min_rate", "RPG_MIN_RATE", ""}, Unit::kMbps, 1, kMaxMbps,
     [](CcConfig& c, uint64_t v) { c.dcqcn.rpg_min_rate = mbps(v); }},
    {"rate_to_set_on_first_cnp", {"rp_rate_to_set_on_first_cnp", "RATE_TO_SET_ON_FIRST_CNP", ""}, Unit::kMbps, 0,
     kMaxMbps, [](CcConfig& c, uint64_t v) { c.dcqcn.rate_to_set_on_first_cnp = mbps(v); }},
    {"rate_reduce_monitor_period", {"rp_rate_reduce_monitor_period", "RATE_REDUCE_MONITOR_PERIOD", ""}, Unit::kMicros,
     1, kU32, [](CcConfig& c, uint64_t v) { c.dcqcn.rate_reduce_monitor_period = us(v); }},
    {"dce_tcp_g", {"rp_dce_tcp_g", "DCE_TCP_G", ""}, Unit::kFixed1024, 0, 1023,
     [](CcConfig& c, uint64_t v) { c.dcqcn.dce_tcp_g = static_cast<uint32_t>(v); }},
    {"dce_tcp_rtt", {"rp_dce_tcp_rtt", "DCE_TCP_RTT", "DCQCN_NI_ALPH_UPDATE_PERIOD"}, Unit::kMicros, 1, 131071,
     [](CcConfig& c, uint64_t v) { c.dcqcn.dce_tcp_rtt = us(v); }},
    {"initial_alpha_value", {"rp_initial_alpha_value", "INITIAL_ALPHA_VALUE", ""}, Unit::kFixed1024, 0, 1023,
     [](CcConfig& c, uint64_t v) { c.dcqcn.initial_alpha_value = static_cast<uint32_t>(v); }},
    {"min_time_between_cnps", {"np_min_time_between_cnps", "MIN_TIME_BETWEEN_CNPS", ""}, Unit::kMicros, 0, 131071,
     [](CcConfig& c, uint64_t v) { c.dcqcn.min_time_between_cnps = us(v); }},
    {"cnp_dscp", {"np_cnp_dscp", "CNP_DSCP", ""}, Unit::kCode, 0, 63,
     [](CcConfig& c, uint64_t v) { c.dcqcn.cnp_dscp = static_cast<uint8_t>(v); }},
    {"cnp_802p_prio", {"np_cnp_prio", "CNP_802P_PRIO", ""}, Unit::kCode, 0, 7,
     [](CcConfig& c, uint64_t v) { c.dcqcn.cnp_802p_prio = static_cast<uint8_t>(v); }},
    {"adaptive_routing", {"ROCE_ADAPTIVE_ROUTING_EN", "", ""}, Unit::kBool, 0, 1,
     [](CcConfig& c, uint64_t v) { c.adaptive_routing = v != 0; }},
}};

// mlxconfig prints per-port knobs with a _P1/_P2 suffix (RPG_AI_RATE_P1).
std::string_view strip_port_suffix(std::string_view key) {
    if (key.size() > 3 && key[key.size() - 3] == '_' && key[key.size() - 2] == 'P' &&
        (key.back() == '1' || key.back() == '2'))
        return key.substr(0, key.size() - 3);
    return key;
}

const Knob* find_knob(std::string_view key) {
    const std::string_view bare = strip_port_suffix(key);
    for (const Knob& k : kKnobs) {
        if (k.name == key) return &k;
        for (std::string_view a : k.aliases)
            if (!a.empty() && (a == key || (bare != key && a == bare))) return &k;
    }
    return nullptr;
}

std::string range_text(const Knob& k) {
    std::ostringstream os;
    if (k.unit == Unit::kBool)
        os << "0 or 1 (false/true)";
    else
        os << "[" << k.min << ", " << k.max << "]" << unit_name(k.unit);
    return os.str();
}

std::string describe_key(std::string_view key, const Knob& k) {
    std::string s = "'" + std::string(key) + "'";
    if (key != k.name) s += " (" + std::string(k.name) + ")";
    return s;
}

// Accepts decimal, 0x-hex, true/false, and mlxconfig's "True(1)" display form.
bool parse_value(std::string_view text, uint64_t& out) {
    if (const auto open = text.find('('); open != std::string_view::npos && text.back() == ')')
        text = text.substr(open + 1, text.size() - open - 2);
    std::string lower(text);
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == "true") { out = 1; return true; }
    if (lower == "false") { out = 0; return true; }
    int base = 10;
    std::string_view digits = lower;
    if (digits.starts_with("0x")) { base = 16; digits.remove_prefix(2); }
    if (digits.empty()) return false;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out, base);
    return ec == std::errc{} && p == digits.data() + digits.size();
}

CcConfigResult fail(std::string msg) { return CcConfigResult{CcConfig{}, "cc config: " + std::move(msg)}; }

std::string preset_list() {
    std::string s;
    for (std::string_view n : cc_preset_names()) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
}

// A preset may build on another preset; deeper nesting (or a cycle) is refused.
constexpr int kMaxPresetDepth = 2;

CcConfigResult apply(const YAML::Node& root, int depth);
CcConfigResult load_preset(std::string_view name, int depth);

// The forms mlxconfig users have at hand: `KEY=VALUE` tokens (as given to
// `mlxconfig set`, several per line allowed) or `KEY  VALUE` rows (as
// `mlxconfig query` prints them); '#' starts a comment.
bool parse_lines(std::string_view text, YAML::Node& out, std::string& err) {
    out = YAML::Node(YAML::NodeType::Map);
    std::istringstream in{std::string(text)};
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        std::vector<std::string> tok;
        for (std::string w; words >> w;) tok.push_back(w);
        if (tok.empty()) continue;
        if (tok[0].find('=') != std::string::npos) {
            for (const std::string& t : tok) {
                const auto eq = t.find('=');
                if (eq == std::string::npos || eq == 0 || eq + 1 == t.size()) {
                    err = "line " + std::to_string(n) + ": '" + t + "' is not KEY=VALUE";
                    return false;
                }
                out[t.substr(0, eq)] = t.substr(eq + 1);
            }
        } else if (tok.size() == 2) {
            out[tok[0]] = tok[1];
        } else {
            err = "line " + std::to_string(n) + ": expected 'key: value', 'KEY=VALUE' or 'KEY VALUE'";
            return false;
        }
    }
    return true;
}

CcConfigResult parse_text(std::string_view text, int depth) {
    YAML::Node root;
    try {
        root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
        return fail(std::string("YAML syntax error: ") + e.what());
    }
    // Lines without a colon parse as one YAML scalar: read them as mlxconfig text.
    if (root.IsScalar()) {
        std::string err;
        if (!parse_lines(text, root, err)) return fail(err);
    }
    return apply(root, depth);
}

CcConfigResult load_preset(std::string_view name, int depth) {
    for (std::size_t i = 0; i < detail::kEmbeddedPresetCount; ++i)
        if (detail::kEmbeddedPresets[i].name == name) return parse_text(detail::kEmbeddedPresets[i].yaml, depth);
    return fail("key 'preset' value '" + std::string(name) + "' is not a preset; allowed: " + preset_list());
}

CcConfigResult apply(const YAML::Node& root, int depth) {
    CcConfigResult res;
    if (!root || root.IsNull()) return res;
    if (!root.IsMap()) return fail("the top level must be a mapping of knob: value");

    if (const YAML::Node p = root["preset"]) {
        if (depth >= kMaxPresetDepth) return fail("key 'preset' nests presets more than " + std::to_string(kMaxPresetDepth) + " deep");
        if (!p.IsScalar()) return fail("key 'preset' must be a preset name; allowed: " + preset_list());
        res = load_preset(p.Scalar(), depth + 1);
        if (!res.ok()) return res;
    }

    std::set<std::string_view> seen;
    for (const auto& kv : root) {
        const std::string key = kv.first.Scalar();
        if (key == "preset") continue;
        if (!kv.second.IsScalar())
            return fail("key '" + key + "' must have a scalar value");
        const std::string value = kv.second.Scalar();
        if (key == "algorithm") {
            if (value == "dcqcn") res.config.algorithm = CcAlgorithm::kDcqcn;
            else if (value == "none") res.config.algorithm = CcAlgorithm::kNone;
            else return fail("key 'algorithm' value '" + value + "' is not allowed; allowed: none, dcqcn");
            continue;
        }
        const Knob* k = find_knob(key);
        if (k == nullptr)
            return fail("unknown key '" + key + "' (see cc/README.md for the accepted names)");
        if (!seen.insert(k->name).second)
            return fail("key " + describe_key(key, *k) + " is set twice (under two of its names)");
        uint64_t v = 0;
        if (!parse_value(value, v) || v < k->min || v > k->max)
            return fail("key " + describe_key(key, *k) + " value '" + value + "' is out of range; allowed " +
                        range_text(*k));
        k->set(res.config, v);
    }
    const DcqcnConfig& d = res.config.dcqcn;
    if (d.rpg_max_rate.v != 0 && d.rpg_min_rate > d.rpg_max_rate)
        return fail("key 'rpg_min_rate' value " + std::to_string(d.rpg_min_rate.v / 1000000) +
                    " exceeds rpg_max_rate " + std::to_string(d.rpg_max_rate.v / 1000000) + "; allowed [1, rpg_max_rate] Mb/s");
    return res;
}

}  // namespace

std::string_view algorithm_name(CcAlgorithm a) { return a == CcAlgorithm::kDcqcn ? "dcqcn" : "none"; }

std::span<const std::string_view> cc_preset_names() {
    static const std::vector<std::string_view> names = [] {
        std::vector<std::string_view> v;
        for (std::size_t i = 0; i < detail::kEmbeddedPresetCount; ++i) v.push_back(detail::kEmbeddedPresets[i].name);
        return v;
    }();
    return names;
}

CcConfigResult load_cc_preset(std::string_view name) { return load_preset(name, 1); }

CcConfigResult parse_cc_config(std::string_view yaml_text) { return parse_text(yaml_text, 0); }

CcConfigResult load_cc_config_file(const std::string& path) {
    ReadTextError err;
    const std::optional<std::string> text = read_text_file(path, err);
    if (err == ReadTextError::TooLarge)
        return fail("'" + path + "' is larger than " + std::to_string(kMaxConfigFileBytes >> 20) +
                    " MiB, not a NIC profile");
    if (!text) return fail("'" + path + "': " + read_text_error(err));
    CcConfigResult r = parse_cc_config(*text);
    if (!r.ok()) r.error += " (in " + path + ")";
    return r;
}

}  // namespace rocemu::cc
