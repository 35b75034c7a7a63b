#include "switch/config.hpp"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/text_file.hpp"

namespace rocemu::sw {

SwitchConfig sonic_default_config(std::size_t nports, BitsPerSec speed) {
    SwitchConfig c;
    for (std::size_t i = 0; i < nports; ++i) {
        PortConfig p;
        p.name = fmt::format("Ethernet{}", i * 4);
        p.speed = speed;
        c.ports.push_back(p);
    }
    c.dscp_to_tc.fill(1);
    c.dscp_to_tc[3] = 3;
    c.dscp_to_tc[4] = 4;
    c.dscp_to_tc[8] = 0;
    c.dscp_to_tc[46] = 5;
    c.dscp_to_tc[48] = 6;
    for (int i = 0; i < kNumTc; ++i) c.tc_to_queue[i] = static_cast<uint8_t>(i);
    c.tc_to_pg = {0, 0, 0, 3, 4, 0, 0, 7};
    c.pfc_enable = (1 << 3) | (1 << 4);
    for (int q = 0; q < kNumTc; ++q) c.scheduler[q] = SchedulerConfig{false, (q == 3 || q == 4) ? 15u : 14u};
    WredProfile lossless;
    lossless.wred_green_enable = true;
    lossless.ecn = EcnMode::All;
    lossless.green_min_threshold = Bytes{1048576};
    lossless.green_max_threshold = Bytes{2097152};
    lossless.green_drop_probability = 5;
    c.wred[3] = lossless;
    c.wred[4] = lossless;
    c.pool_size = Bytes{12 * 1024 * 1024};
    c.pg_lossless = PgProfile{Bytes{9540}, Bytes{9540}, Bytes{160272}, Bytes{2496}, Threshold{true, 0, {}}};
    c.pg_lossy = PgProfile{Bytes{0}, {}, {}, {}, Threshold{true, 3, {}}};
    c.queue_lossy = QueueProfile{Bytes{1518}, Threshold{true, 3, {}}};
    return c;
}

namespace {
bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

std::string check_threshold(const char* key, const Threshold& t) {
    if (t.dynamic && (t.dynamic_th < -7 || t.dynamic_th > 7))
        return fmt::format("{}.dynamic_th: {} out of range [-7, 7]", key, t.dynamic_th);
    return {};
}
}  // namespace

std::string validate(const SwitchConfig& c) {
    if (c.ports.empty() || c.ports.size() > kMaxPorts)
        return fmt::format("PORT: {} ports, allowed [1, {}]", c.ports.size(), kMaxPorts);
    for (const PortConfig& p : c.ports) {
        if (p.speed < BitsPerSec::mbps(1) || p.speed > BitsPerSec::gbps(800))
            return fmt::format("PORT.{}.speed: {} Mb/s out of range [1, 800000]", p.name, p.speed.as_mbps());
        if (p.mtu < 68 || p.mtu > 9216) return fmt::format("PORT.{}.mtu: {} out of range [68, 9216]", p.name, p.mtu);
        if (p.propagation_delay < Nanos{0})
            return fmt::format("PORT.{}.propagation_delay_ns: {} must be >= 0", p.name, p.propagation_delay.v);
    }
    for (int d = 0; d < 64; ++d)
        if (c.dscp_to_tc[d] >= kNumTc) return fmt::format("DSCP_TO_TC_MAP.{}: {} out of range [0, 7]", d, c.dscp_to_tc[d]);
    for (int t = 0; t < kNumTc; ++t) {
        if (c.tc_to_queue[t] >= kNumTc)
            return fmt::format("TC_TO_QUEUE_MAP.{}: {} out of range [0, 7]", t, c.tc_to_queue[t]);
        if (c.tc_to_pg[t] >= kNumTc)
            return fmt::format("TC_TO_PRIORITY_GROUP_MAP.{}: {} out of range [0, 7]", t, c.tc_to_pg[t]);
    }
    for (int q = 0; q < kNumTc; ++q) {
        if (!c.scheduler[q].strict && (c.scheduler[q].weight < 1 || c.scheduler[q].weight > 100))
            return fmt::format("SCHEDULER.{}.weight: {} out of range [1, 100]", q, c.scheduler[q].weight);
        const WredProfile& w = c.wred[q];
        if (w.green_min_threshold > w.green_max_threshold)
            return fmt::format("QUEUE.{}.green_min_threshold: {} above green_max_threshold {}", q,
                               w.green_min_threshold.v, w.green_max_threshold.v);
        if (w.green_drop_probability > 100)
            return fmt::format("QUEUE.{}.green_drop_probability: {} out of range [0, 100]", q,
                               w.green_drop_probability);
    }
    if (c.pool_size.v == 0 || c.pool_size.v > (1ull << 32))
        return fmt::format("BUFFER_POOL.size: {} out of range [1, 4294967296]", c.pool_size.v);
    if (auto e = check_threshold("BUFFER_PROFILE.pg_lossless_profile", c.pg_lossless.th); !e.empty()) return e;
    if (auto e = check_threshold("BUFFER_PROFILE.ingress_lossy_profile", c.pg_lossy.th); !e.empty()) return e;
    if (auto e = check_threshold("BUFFER_PROFILE.egress_lossy_profile", c.queue_lossy.th); !e.empty()) return e;
    if (c.pfc_enable && c.pg_lossless.xoff.v < 2ull * 9216)
        return fmt::format("BUFFER_PROFILE.pg_lossless_profile.xoff: {} below two jumbo frames (18432)",
                           c.pg_lossless.xoff.v);
    if (c.pause_quanta == 0) return "SWITCH.pause_quanta: 0 out of range [1, 65535]";
    if (c.refresh_percent < 1 || c.refresh_percent > 99)
        return fmt::format("SWITCH.pfc_refresh_percent: {} out of range [1, 99]", c.refresh_percent);
    if (c.pfc_wd.detection_time <= Nanos{0} || c.pfc_wd.restoration_time <= Nanos{0})
        return "PFC_WD: detection_time and restoration_time must be > 0";
    if (!pow2(c.routing.flowlet_table_size) || c.routing.flowlet_table_size > (1u << 24))
        return fmt::format("ROUTING.flowlet_table_size: {} must be a power of two in [1, 16777216]",
                           c.routing.flowlet_table_size);
    if (c.routing.flowlet_gap <= Nanos{0})
        return fmt::format("ROUTING.flowlet_gap_us: {} must be > 0", c.routing.flowlet_gap.us());
    return {};
}

namespace {

// Reads SONiC-style YAML (values may be strings or numbers) and keeps the
// first error, which names the full key path.
class Reader {
public:
    std::string error;

    bool ok() const { return error.empty(); }
    void fail(std::string msg) {
        if (error.empty()) error = std::move(msg);
    }

    bool is_map(const YAML::Node& n, const std::string& key) {
        if (n.IsMap()) return true;
        fail(fmt::format("{}: expected a mapping", key));
        return false;
    }

    // Every key of `n` must be one of `allowed`: a typo is an error, not a
    // silently ignored setting.
    void only(const YAML::Node& n, const std::string& key, std::initializer_list<std::string_view> allowed) {
        for (const auto& kv : n) {
            const std::string k = kv.first.as<std::string>();
            bool found = false;
            for (auto a : allowed) found = found || a == k;
            if (!found) {
                std::string list;
                for (auto a : allowed) list += fmt::format("{}{}", list.empty() ? "" : ", ", a);
                fail(fmt::format("{}.{}: unknown key (allowed: {})", key, k, list));
            }
        }
    }

    // A scalar's text; a list or mapping where a value belongs is an error
    // naming the key, not a yaml-cpp conversion exception.
    std::optional<std::string> text(const YAML::Node& n, const std::string& key) {
        if (n.IsScalar()) return n.as<std::string>();
        fail(fmt::format("{}: expected a single value", key));
        return std::nullopt;
    }

    std::optional<int64_t> integer(const YAML::Node& n, const std::string& key, int64_t lo, int64_t hi) {
        const auto t = text(n, key);
        if (!t) return std::nullopt;
        const std::string& s = *t;
        int64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || p != s.data() + s.size()) {
            fail(fmt::format("{}: '{}' is not an integer (allowed [{}, {}])", key, s, lo, hi));
            return std::nullopt;
        }
        if (v < lo || v > hi) {
            fail(fmt::format("{}: {} out of range [{}, {}]", key, v, lo, hi));
            return std::nullopt;
        }
        return v;
    }

    std::optional<double> real(const YAML::Node& n, const std::string& key, double lo, double hi) {
        const auto t = text(n, key);
        if (!t) return std::nullopt;
        char* end = nullptr;
        const double v = std::strtod(t->c_str(), &end);
        if (t->empty() || end != t->c_str() + t->size()) {
            fail(fmt::format("{}: '{}' is not a number (allowed [{}, {}])", key, *t, lo, hi));
            return std::nullopt;
        }
        if (!(v >= lo && v <= hi)) {
            fail(fmt::format("{}: {} out of range [{}, {}]", key, v, lo, hi));
            return std::nullopt;
        }
        return v;
    }

    void set_nanos(const YAML::Node& parent, const char* name, const std::string& path, Nanos& out) {
        int64_t v = out.v;
        set_int(parent, name, path, 0, int64_t{1} << 62, v);
        out = Nanos{v};
    }

    template <typename T>
    void set_int(const YAML::Node& parent, const char* name, const std::string& path, int64_t lo, int64_t hi, T& out) {
        if (!parent[name]) return;
        if (auto v = integer(parent[name], path + "." + name, lo, hi)) out = static_cast<T>(*v);
    }

    void set_bytes(const YAML::Node& parent, const char* name, const std::string& path, Bytes& out) {
        if (!parent[name]) return;
        if (auto v = integer(parent[name], path + "." + name, 0, int64_t{1} << 32)) out = Bytes{static_cast<uint64_t>(*v)};
    }

    void set_bool(const YAML::Node& parent, const char* name, const std::string& path, bool& out) {
        if (!parent[name]) return;
        const auto t = text(parent[name], path + "." + name);
        if (!t) return;
        const std::string& s = *t;
        if (s == "true")
            out = true;
        else if (s == "false")
            out = false;
        else
            fail(fmt::format("{}.{}: '{}' is not a boolean (allowed: true, false)", path, name, s));
    }

    // "3,4" or "3-4" or a YAML list of indices in [0, 7].
    std::optional<uint8_t> index_set(const YAML::Node& n, const std::string& key) {
        std::vector<std::string> items;
        if (n.IsSequence()) {
            for (const auto& i : n)
                if (auto t = text(i, key)) items.push_back(*t);
        } else {
            const auto t = text(n, key);
            if (!t) return std::nullopt;
            std::stringstream ss(*t);
            for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
        }
        uint8_t bits = 0;
        for (const std::string& raw : items) {
            const std::string item = raw.substr(raw.find_first_not_of(' ') == std::string::npos ? raw.size()
                                                                                                 : raw.find_first_not_of(' '));
            if (item.empty()) continue;
            const auto dash = item.find('-');
            const auto lo = integer(YAML::Node(item.substr(0, dash)), key, 0, kNumTc - 1);
            const auto hi = dash == std::string::npos ? lo : integer(YAML::Node(item.substr(dash + 1)), key, 0, kNumTc - 1);
            if (!lo || !hi) return std::nullopt;
            for (int64_t i = *lo; i <= *hi; ++i) bits |= static_cast<uint8_t>(1u << i);
        }
        return bits;
    }
};

void read_ports(Reader& r, const YAML::Node& n, SwitchConfig& c) {
    if (!r.is_map(n, "PORT")) return;
    c.ports.clear();
    for (const auto& kv : n) {
        const std::string name = kv.first.as<std::string>();
        const std::string path = "PORT." + name;
        if (!r.is_map(kv.second, path)) return;
        r.only(kv.second, path, {"speed", "mtu", "propagation_delay_ns", "admin_status", "alias", "lanes", "index"});
        PortConfig p;
        p.name = name;
        uint64_t mbps = 100000;
        r.set_int(kv.second, "speed", path, 1, 800000, mbps);
        p.speed = BitsPerSec::mbps(static_cast<double>(mbps));
        r.set_int(kv.second, "mtu", path, 68, 9216, p.mtu);
        int64_t prop = 0;
        r.set_int(kv.second, "propagation_delay_ns", path, 0, 1000000000, prop);
        p.propagation_delay = Nanos{prop};
        c.ports.push_back(p);
    }
}

template <std::size_t N>
void read_map(Reader& r, const YAML::Node& n, const char* key, int key_max, std::array<uint8_t, N>& out) {
    if (!r.is_map(n, key)) return;
    for (const auto& kv : n) {
        const std::string k = kv.first.as<std::string>();
        const auto from = r.integer(kv.first, fmt::format("{}.{}", key, k), 0, key_max);
        const auto to = r.integer(kv.second, fmt::format("{}.{}", key, k), 0, kNumTc - 1);
        if (from && to) out[static_cast<std::size_t>(*from)] = static_cast<uint8_t>(*to);
    }
}

void read_threshold(Reader& r, const YAML::Node& n, const std::string& path, Threshold& t) {
    if (n["dynamic_th"] && n["static_th"]) r.fail(path + ": give dynamic_th or static_th, not both");
    if (n["dynamic_th"]) {
        t.dynamic = true;
        r.set_int(n, "dynamic_th", path, -7, 7, t.dynamic_th);
    }
    if (n["static_th"]) {
        t.dynamic = false;
        r.set_bytes(n, "static_th", path, t.static_th);
    }
}

void read_buffers(Reader& r, const YAML::Node& root, SwitchConfig& c) {
    if (const auto pool = root["BUFFER_POOL"]) {
        if (!r.is_map(pool, "BUFFER_POOL")) return;
        r.only(pool, "BUFFER_POOL", {"size"});
        r.set_bytes(pool, "size", "BUFFER_POOL", c.pool_size);
    }
    if (const auto prof = root["BUFFER_PROFILE"]) {
        if (!r.is_map(prof, "BUFFER_PROFILE")) return;
        r.only(prof, "BUFFER_PROFILE", {"pg_lossless_profile", "ingress_lossy_profile", "egress_lossy_profile"});
        if (const auto p = prof["pg_lossless_profile"]) {
            const std::string path = "BUFFER_PROFILE.pg_lossless_profile";
            r.only(p, path, {"size", "xon", "xoff", "xon_offset", "dynamic_th", "static_th"});
            r.set_bytes(p, "size", path, c.pg_lossless.size);
            r.set_bytes(p, "xon", path, c.pg_lossless.xon);
            r.set_bytes(p, "xoff", path, c.pg_lossless.xoff);
            r.set_bytes(p, "xon_offset", path, c.pg_lossless.xon_offset);
            read_threshold(r, p, path, c.pg_lossless.th);
        }
        if (const auto p = prof["ingress_lossy_profile"]) {
            const std::string path = "BUFFER_PROFILE.ingress_lossy_profile";
            r.only(p, path, {"size", "dynamic_th", "static_th"});
            r.set_bytes(p, "size", path, c.pg_lossy.size);
            read_threshold(r, p, path, c.pg_lossy.th);
        }
        if (const auto p = prof["egress_lossy_profile"]) {
            const std::string path = "BUFFER_PROFILE.egress_lossy_profile";
            r.only(p, path, {"size", "dynamic_th", "static_th"});
            r.set_bytes(p, "size", path, c.queue_lossy.size);
            read_threshold(r, p, path, c.queue_lossy.th);
        }
    }
}

void read_qos(Reader& r, const YAML::Node& root, SwitchConfig& c) {
    if (const auto m = root["PORT_QOS_MAP"]) {
        if (!r.is_map(m, "PORT_QOS_MAP")) return;
        r.only(m, "PORT_QOS_MAP", {"pfc_enable"});
        if (m["pfc_enable"])
            if (auto bits = r.index_set(m["pfc_enable"], "PORT_QOS_MAP.pfc_enable")) c.pfc_enable = *bits;
    }
    if (const auto m = root["DSCP_TO_TC_MAP"]) read_map(r, m, "DSCP_TO_TC_MAP", 63, c.dscp_to_tc);
    if (const auto m = root["TC_TO_QUEUE_MAP"]) read_map(r, m, "TC_TO_QUEUE_MAP", kNumTc - 1, c.tc_to_queue);
    if (const auto m = root["TC_TO_PRIORITY_GROUP_MAP"])
        read_map(r, m, "TC_TO_PRIORITY_GROUP_MAP", kNumTc - 1, c.tc_to_pg);

    if (const auto s = root["SCHEDULER"]) {
        if (!r.is_map(s, "SCHEDULER")) return;
        for (const auto& kv : s) {
            const std::string path = "SCHEDULER." + kv.first.as<std::string>();
            const auto qs = r.index_set(kv.first, path);
            if (!qs || !r.is_map(kv.second, path)) return;
            r.only(kv.second, path, {"type", "weight"});
            SchedulerConfig sc;
            if (kv.second["type"]) {
                const std::string t = r.text(kv.second["type"], path + ".type").value_or("DWRR");
                if (t == "STRICT")
                    sc.strict = true;
                else if (t != "DWRR")
                    r.fail(fmt::format("{}.type: '{}' not allowed (allowed: STRICT, DWRR)", path, t));
            }
            r.set_int(kv.second, "weight", path, 1, 100, sc.weight);
            for (int q = 0; q < kNumTc; ++q)
                if ((*qs >> q) & 1) c.scheduler[q] = sc;
        }
    }

    std::vector<std::pair<std::string, WredProfile>> profiles;
    if (const auto w = root["WRED_PROFILE"]) {
        if (!r.is_map(w, "WRED_PROFILE")) return;
        for (const auto& kv : w) {
            const std::string name = kv.first.as<std::string>();
            const std::string path = "WRED_PROFILE." + name;
            if (!r.is_map(kv.second, path)) return;
            r.only(kv.second, path,
                   {"wred_green_enable", "ecn", "green_min_threshold", "green_max_threshold", "green_drop_probability"});
            WredProfile p;
            r.set_bool(kv.second, "wred_green_enable", path, p.wred_green_enable);
            if (kv.second["ecn"]) {
                const std::string e = r.text(kv.second["ecn"], path + ".ecn").value_or("ecn_none");
                if (e == "ecn_all" || e == "ecn_green")
                    p.ecn = EcnMode::All;
                else if (e != "ecn_none")
                    r.fail(fmt::format("{}.ecn: '{}' not allowed (allowed: ecn_none, ecn_green, ecn_all)", path, e));
            }
            r.set_bytes(kv.second, "green_min_threshold", path, p.green_min_threshold);
            r.set_bytes(kv.second, "green_max_threshold", path, p.green_max_threshold);
            r.set_int(kv.second, "green_drop_probability", path, 0, 100, p.green_drop_probability);
            if (p.green_min_threshold > p.green_max_threshold)
                r.fail(fmt::format("{}.green_min_threshold: {} above green_max_threshold {}", path,
                                   p.green_min_threshold.v, p.green_max_threshold.v));
            profiles.emplace_back(name, p);
        }
    }
    if (const auto q = root["QUEUE"]) {
        if (!r.is_map(q, "QUEUE")) return;
        for (const auto& kv : q) {
            const std::string path = "QUEUE." + kv.first.as<std::string>();
            const auto qs = r.index_set(kv.first, path);
            if (!qs || !r.is_map(kv.second, path)) return;
            r.only(kv.second, path, {"wred_profile"});
            if (!kv.second["wred_profile"]) continue;
            const auto name_text = r.text(kv.second["wred_profile"], path + ".wred_profile");
            if (!name_text) return;
            const std::string& name = *name_text;
            const WredProfile* found = nullptr;
            for (const auto& [n, p] : profiles)
                if (n == name) found = &p;
            if (!found) {
                r.fail(fmt::format("{}.wred_profile: '{}' is not defined in WRED_PROFILE", path, name));
                return;
            }
            for (int i = 0; i < kNumTc; ++i)
                if ((*qs >> i) & 1) c.wred[i] = *found;
        }
    }
}

void read_switch(Reader& r, const YAML::Node& s, SwitchConfig& c) {
    if (!r.is_map(s, "SWITCH")) return;
    r.only(s, "SWITCH", {"pause_quanta", "pfc_refresh_percent", "ecn_marking"});
    r.set_int(s, "pause_quanta", "SWITCH", 1, 65535, c.pause_quanta);
    r.set_int(s, "pfc_refresh_percent", "SWITCH", 1, 99, c.refresh_percent);
    if (s["ecn_marking"]) {
        const std::string m = r.text(s["ecn_marking"], "SWITCH.ecn_marking").value_or("enqueue");
        if (m == "enqueue")
            c.wred_stage = WredStage::Enqueue;
        else if (m == "dequeue")
            c.wred_stage = WredStage::Dequeue;
        else
            r.fail(fmt::format("SWITCH.ecn_marking: '{}' not allowed (allowed: enqueue, dequeue)", m));
    }
}

void read_pfc_wd(Reader& r, const YAML::Node& w, SwitchConfig& c) {
    if (!r.is_map(w, "PFC_WD")) return;
    r.only(w, "PFC_WD", {"enabled", "detection_time", "restoration_time", "action"});
    r.set_bool(w, "enabled", "PFC_WD", c.pfc_wd.enabled);
    int64_t det = c.pfc_wd.detection_time.v / 1000000;
    int64_t res = c.pfc_wd.restoration_time.v / 1000000;
    r.set_int(w, "detection_time", "PFC_WD", 100, 5000, det);
    r.set_int(w, "restoration_time", "PFC_WD", 100, 60000, res);
    c.pfc_wd.detection_time = Nanos::from_ms(static_cast<double>(det));
    c.pfc_wd.restoration_time = Nanos::from_ms(static_cast<double>(res));
    if (w["action"]) {
        const std::string a = r.text(w["action"], "PFC_WD.action").value_or("drop");
        bool found = false;
        for (std::size_t i = 0; i < kWdActionNames.size(); ++i)
            if (kWdActionNames[i] == a) {
                c.pfc_wd.action = static_cast<WdAction>(i);
                found = true;
            }
        if (!found) r.fail(fmt::format("PFC_WD.action: '{}' not allowed (allowed: drop, forward, alert)", a));
    }
}

void read_routing(Reader& r, const YAML::Node& n, SwitchConfig& c) {
    if (!r.is_map(n, "ROUTING")) return;
    r.only(n, "ROUTING", {"ecmp_hash", "ecmp_hash_seed", "adaptive_routing", "flowlet_gap_us", "flowlet_table_size"});
    if (const auto h = n["ecmp_hash"]) {
        if (!h.IsSequence()) return r.fail("ROUTING.ecmp_hash: expected a list");
        static constexpr std::pair<std::string_view, HashField> kFields[] = {
            {"SRC_IP", kHashSrcIp},           {"DST_IP", kHashDstIp},           {"IP_PROTOCOL", kHashProto},
            {"L4_SRC_PORT", kHashSrcPort}, {"L4_DST_PORT", kHashDstPort}, {"IN_PORT", kHashInPort}};
        c.routing.hash_fields = 0;
        for (const auto& f : h) {
            const std::string s = r.text(f, "ROUTING.ecmp_hash").value_or("");
            bool found = false;
            for (const auto& [name, bit] : kFields)
                if (name == s) {
                    c.routing.hash_fields |= bit;
                    found = true;
                }
            if (!found)
                r.fail(fmt::format("ROUTING.ecmp_hash: '{}' not allowed (allowed: SRC_IP, DST_IP, IP_PROTOCOL, "
                                   "L4_SRC_PORT, L4_DST_PORT, IN_PORT)",
                                   s));
        }
    }
    r.set_int(n, "ecmp_hash_seed", "ROUTING", 0, INT64_MAX, c.routing.hash_seed);
    if (const auto a = n["adaptive_routing"]) {
        if (!r.is_map(a, "ROUTING.adaptive_routing")) return;
        for (const auto& kv : a) {
            const std::string path = "ROUTING.adaptive_routing." + kv.first.as<std::string>();
            const auto tcs = r.index_set(kv.first, path);
            if (!tcs) return;
            const std::string m = r.text(kv.second, path).value_or("off");
            ArMode mode = ArMode::Off;
            if (m == "per_packet")
                mode = ArMode::PerPacket;
            else if (m == "flowlet")
                mode = ArMode::Flowlet;
            else if (m != "off")
                r.fail(fmt::format("{}: '{}' not allowed (allowed: off, per_packet, flowlet)", path, m));
            for (int t = 0; t < kNumTc; ++t)
                if ((*tcs >> t) & 1) c.routing.adaptive[t] = mode;
        }
    }
    int64_t gap_us = c.routing.flowlet_gap.v / 1000;
    r.set_int(n, "flowlet_gap_us", "ROUTING", 1, 1000000, gap_us);
    c.routing.flowlet_gap = Nanos{gap_us * 1000};
    r.set_int(n, "flowlet_table_size", "ROUTING", 1, 1 << 24, c.routing.flowlet_table_size);
}

void read_link(Reader& r, const YAML::Node& n, LinkConfig& c) {
    const std::string path = "LINK";
    if (!r.is_map(n, path)) return;
    r.only(n, path,
           {"speed", "propagation_delay_ns", "wire_overhead_bytes", "queue_limit_bytes", "loss_rate", "corrupt_rate",
            "corrupt_as", "reorder_rate", "reorder_delay_ns", "jitter_ns", "jitter_reorders", "duplicate_rate",
            "paths_ns", "down_up", "pfc_storm"});
    uint64_t mbps = c.speed.v / 1000000;
    r.set_int(n, "speed", path, 1, 800000, mbps);
    c.speed = BitsPerSec::mbps(static_cast<double>(mbps));
    r.set_nanos(n, "propagation_delay_ns", path, c.propagation_delay);
    r.set_int(n, "wire_overhead_bytes", path, 0, 64, c.wire_overhead.v);
    r.set_bytes(n, "queue_limit_bytes", path, c.queue_limit);
    for (auto [key, out] : {std::pair{"loss_rate", &c.loss_rate}, std::pair{"corrupt_rate", &c.corrupt_rate},
                            std::pair{"reorder_rate", &c.reorder_rate}, std::pair{"duplicate_rate", &c.duplicate_rate}})
        if (n[key])
            if (auto v = r.real(n[key], path + "." + key, 0.0, 1.0)) *out = *v;
    if (n["corrupt_as"]) {
        const std::string a = r.text(n["corrupt_as"], "LINK.corrupt_as").value_or("fcs");
        if (a == "fcs")
            c.corrupt_as = Corruption::BadFcs;
        else if (a == "icrc")
            c.corrupt_as = Corruption::BadIcrc;
        else
            r.fail(fmt::format("LINK.corrupt_as: '{}' not allowed (allowed: fcs, icrc)", a));
    }
    r.set_nanos(n, "reorder_delay_ns", path, c.reorder_delay);
    r.set_nanos(n, "jitter_ns", path, c.jitter);
    r.set_bool(n, "jitter_reorders", path, c.jitter_reorders);
    if (const auto ps = n["paths_ns"]) {
        if (!ps.IsSequence() || ps.size() > link::kMaxPaths)
            return r.fail(fmt::format("LINK.paths_ns: expected a list of at most {} delays", link::kMaxPaths));
        for (std::size_t i = 0; i < ps.size(); ++i)
            if (auto v = r.integer(ps[i], fmt::format("LINK.paths_ns[{}]", i), 0, int64_t{1} << 62))
                c.paths.push_back(Nanos{*v});
    }
    if (const auto du = n["down_up"]) {
        if (!du.IsSequence()) return r.fail("LINK.down_up: expected a list of {at_ns, up}");
        for (std::size_t i = 0; i < du.size(); ++i) {
            const std::string item = fmt::format("LINK.down_up[{}]", i);
            if (!r.is_map(du[i], item)) return;
            r.only(du[i], item, {"at_ns", "up"});
            if (!du[i]["at_ns"] || !du[i]["up"]) return r.fail(item + ": needs at_ns and up");
            Nanos at{};
            bool up = true;
            r.set_nanos(du[i], "at_ns", item, at);
            r.set_bool(du[i], "up", item, up);
            c.up_down.emplace_back(at, up);
        }
    }
    if (const auto st = n["pfc_storm"]) {
        const std::string sp = "LINK.pfc_storm";
        if (!r.is_map(st, sp)) return;
        r.only(st, sp, {"start_ns", "stop_ns", "period_ns", "priorities", "quanta"});
        PfcStorm storm;
        storm.start = Nanos{0};
        storm.period = Nanos::from_us(10);
        r.set_nanos(st, "start_ns", sp, storm.start);
        r.set_nanos(st, "stop_ns", sp, storm.stop);
        r.set_nanos(st, "period_ns", sp, storm.period);
        if (storm.period <= Nanos{0}) r.fail(fmt::format("{}.period_ns: {} must be > 0", sp, storm.period.v));
        uint8_t prios = 1 << 3;
        if (st["priorities"])
            if (auto bits = r.index_set(st["priorities"], sp + ".priorities")) prios = *bits;
        uint16_t quanta = 0xFFFF;
        r.set_int(st, "quanta", sp, 1, 65535, quanta);
        storm.frame.class_enable = prios;
        for (int p = 0; p < kNumTc; ++p)
            if ((prios >> p) & 1) storm.frame.quanta[p] = quanta;
        c.storm = storm;
    }
}

}  // namespace

LinkConfigResult parse_link_config(std::string_view yaml_text) {
    LinkConfigResult out;
    Reader r;
    try {
        const YAML::Node root = YAML::Load(std::string(yaml_text));
        LinkConfig c;
        read_link(r, root, c);
        if (r.ok()) r.fail(link::validate(c));
        if (r.ok()) out.config = std::move(c);
    } catch (const YAML::Exception& e) {
        r.fail(fmt::format("LINK: YAML: {}", e.what()));
    }
    out.error = r.error;
    if (!r.ok()) out.config.reset();
    return out;
}

ConfigResult parse_switch_config(std::string_view yaml_text) {
    ConfigResult out;
    YAML::Node root;
    try {
        root = YAML::Load(std::string(yaml_text));
    } catch (const YAML::Exception& e) {
        out.error = fmt::format("YAML syntax: {}", e.what());
        return out;
    }
    Reader r;
    if (!root.IsMap()) {
        out.error = "top level: expected a mapping";
        return out;
    }
    SwitchConfig c = sonic_default_config(0, BitsPerSec::gbps(100));
    try {
        // Inside the try: a key that is not a scalar ({[a]: 1}) throws.
        r.only(root, "top level",
               {"PORT", "PORT_QOS_MAP", "DSCP_TO_TC_MAP", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP", "SCHEDULER",
                "WRED_PROFILE", "QUEUE", "BUFFER_POOL", "BUFFER_PROFILE", "SWITCH", "PFC_WD", "ROUTING"});
        if (!root["PORT"]) r.fail("PORT: missing (at least one port is required)");
        if (r.ok()) read_ports(r, root["PORT"], c);
        if (r.ok()) read_qos(r, root, c);
        if (r.ok()) read_buffers(r, root, c);
        if (r.ok() && root["SWITCH"]) read_switch(r, root["SWITCH"], c);
        if (r.ok() && root["PFC_WD"]) read_pfc_wd(r, root["PFC_WD"], c);
        if (r.ok() && root["ROUTING"]) read_routing(r, root["ROUTING"], c);
    } catch (const YAML::Exception& e) {
        r.fail(fmt::format("YAML structure: {}", e.what()));
    }
    if (r.ok()) r.error = validate(c);
    if (!r.ok()) {
        out.error = r.error;
        return out;
    }
    out.config = std::move(c);
    return out;
}

ConfigResult load_switch_config(const std::string& path) {
    ReadTextError err;
    const std::optional<std::string> text = read_text_file(path, err);
    if (!text) {
        ConfigResult out;
        out.error = err == ReadTextError::TooLarge
                        ? fmt::format("{}: larger than {} MiB, not a switch config", path, kMaxConfigFileBytes >> 20)
                        : fmt::format("{}: {}", path, read_text_error(err));
        return out;
    }
    ConfigResult r = parse_switch_config(*text);
    if (!r.config) r.error = fmt::format("{}: {}", path, r.error);
    return r;
}

}  // namespace rocemu::sw
