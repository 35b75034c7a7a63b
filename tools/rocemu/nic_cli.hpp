// What every rocemu command that runs one emulated NIC (pingpong, rdma-ops,
// perf) takes on its command line, checks and opens the same way: the port
// and host identity, then the NIC profile (congestion control, CNPs, PFC
// from the receive backlog, lab knobs).
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cc/config.hpp"
#include "dataplane/dpdk/nic_profile.hpp"
#include "dataplane/dpdk/rx_pfc.hpp"
#include "dataplane/transport/types.hpp"
#include "verbs/verbs.hpp"

namespace rocemu::cli {

// PFC from the receive backlog and the slow-receiver lab knob, which every
// command that runs a NIC takes (`rocemu host` too, without RDMA).
struct RxPfcCliOptions {
    uint32_t xoff = 0;
    int64_t xon = -1;              // -1: half of XOFF
    int64_t pause_quanta = -1;     // -1: 0xFFFF
    int64_t refresh_percent = -1;  // -1: 50
    uint64_t rx_max_pps = 0;
};

// The receive backlog the loop holds (Nic::kRxBacklog); XOFF must fit in it.
inline constexpr uint32_t kMaxPfcRxXoff = 4096;

// Registers the receive-side PFC options; `o` must live as long as `cmd` does.
inline void add_rx_pfc_options(CLI::App* cmd, RxPfcCliOptions& o) {
    cmd->add_option("--pfc-rx-xoff", o.xoff,
                    fmt::format("send PFC XOFF on the RoCE priority when this many received frames wait "
                                "(1-{}; default: never)", kMaxPfcRxXoff));
    cmd->add_option("--pfc-rx-xon", o.xon, "send PFC XON when the backlog falls below this (default: XOFF/2)");
    cmd->add_option("--pfc-pause-quanta", o.pause_quanta,
                    "pause time of each XOFF in quanta of 512 bit times at the port speed, 1-65535 (default: 65535)");
    cmd->add_option("--pfc-refresh-percent", o.refresh_percent,
                    "send XOFF again after this share of its pause time while the backlog stays, 1-99 (default: 50)");
    cmd->add_option("--rx-max-pps", o.rx_max_pps,
                    "lab: handle at most this many received frames per second (a slow NIC; see --pfc-rx-xoff)");
}

// Checks the receive-side PFC options and writes them into `c` (its
// priority and port speed are left as they are). Returns the error, or "".
inline std::string make_rx_pfc(const RxPfcCliOptions& o, dpdk::RxPfcConfig& c) {
    if (!o.xoff) {
        for (const auto& [name, v] : {std::pair{"--pfc-rx-xon", o.xon}, std::pair{"--pfc-pause-quanta", o.pause_quanta},
                                      std::pair{"--pfc-refresh-percent", o.refresh_percent}})
            if (v >= 0) return fmt::format("{} needs --pfc-rx-xoff", name);
    }
    if (o.xoff > kMaxPfcRxXoff)
        return fmt::format("--pfc-rx-xoff {} is out of range; allowed [1, {}] frames", o.xoff, kMaxPfcRxXoff);
    const int64_t xon = o.xon >= 0 ? o.xon : o.xoff / 2;
    if (o.xoff && xon >= o.xoff)
        return fmt::format("--pfc-rx-xon {} is out of range; allowed [0, {}] (below --pfc-rx-xoff {})", xon,
                           o.xoff - 1, o.xoff);
    if (o.pause_quanta >= 0 && (o.pause_quanta < 1 || o.pause_quanta > 0xFFFF))
        return fmt::format("--pfc-pause-quanta {} is out of range; allowed [1, 65535] (0 would be XON)",
                           o.pause_quanta);
    if (o.refresh_percent >= 0 && (o.refresh_percent < 1 || o.refresh_percent > 99))
        return fmt::format("--pfc-refresh-percent {} is out of range; allowed [1, 99] (a refresh must come before "
                           "the pause runs out)", o.refresh_percent);
    c.xoff = o.xoff;
    c.xon = static_cast<uint32_t>(xon);
    if (o.pause_quanta >= 0) c.pause_quanta = static_cast<uint16_t>(o.pause_quanta);
    if (o.refresh_percent >= 0) c.refresh_percent = static_cast<uint32_t>(o.refresh_percent);
    return {};
}

// The longest TX watchdog --tx-timeout-ms takes (an hour).
inline constexpr int64_t kMaxTxTimeoutMs = 3'600'000;

struct NicCliOptions {
    std::string port;
    host::HostOptions host;
    bool mtu_set = false;
    int gidx = -1;  // -1: the port's default RoCEv2 IPv4 index
    int mtu = 0;    // path MTU in bytes; 0: the port's active MTU
    std::string capture;
    std::string server;
    std::vector<std::string> eal_args;
    // The NIC profile's options; check_nic_options() turns them into `profile`.
    std::string cc;           // none | dcqcn; empty: what the profile says (dcqcn by default)
    std::string cc_preset;    // a compiled-in preset (configs/nic/NAME.yaml)
    std::string nic_profile;  // a YAML or mlxconfig file (configs/nic/README.md)
    bool no_cnp = false;
    bool no_ack_coalescing = false;
    RxPfcCliOptions rx;
    uint32_t mark_ce_every = 0;
    int64_t zero_copy_min = -1;  // -1: the profile's default
    int64_t tx_timeout_ms = -1;  // -1: the profile's default (1 s)
    dpdk::NicProfile profile;
};

// Registers the NIC profile's options (also for commands that take the port
// their own way); `o` must live as long as `cmd` does.
inline void add_nic_profile_options(CLI::App* cmd, NicCliOptions& o) {
    const std::string presets = [] {
        std::string s;
        for (const std::string_view n : cc::cc_preset_names()) s += (s.empty() ? "" : ", ") + std::string(n);
        return s;
    }();
    cmd->add_option("--cc", o.cc, "congestion control of the NIC's QPs: dcqcn (ConnectX's, the default) or none")
        ->check(CLI::IsMember({"none", "dcqcn"}));
    auto* preset = cmd->add_option("--cc-preset", o.cc_preset, "DCQCN preset: " + presets);
    auto* file = cmd->add_option("--nic-profile", o.nic_profile,
                                 "DCQCN knobs from a YAML or mlxconfig file (configs/nic/*.yaml; `preset:` may "
                                 "name the base)");
    preset->excludes(file);
    cmd->add_flag("--no-cnp", o.no_cnp, "send no CNPs for CE-marked packets (for peers that drop them, e.g. Linux rxe)");
    cmd->add_flag("--no-ack-coalescing", o.no_ack_coalescing,
                  "answer every AckReq packet with its own ACK, as Linux rxe does (default: ACKs that have not left "
                  "yet are merged, as on ConnectX)");
    add_rx_pfc_options(cmd, o.rx);
    cmd->add_option("--zero-copy-min", o.zero_copy_min,
                    "send request payload of at least N bytes from the MR's pages, not copied into the frame, on "
                    "ports that take mbuf chains (net_ring, memif copy mode); 0: always copy (default: 1024 on "
                    "memif, 0 on net_ring; at least 512)");
    cmd->add_option("--mark-ce-every", o.mark_ce_every,
                    "lab: mark every Nth ECN-capable RoCEv2 frame received as CE, as a congested switch would");
    cmd->add_option("--tx-timeout-ms", o.tx_timeout_ms,
                    fmt::format("TX watchdog: drop what is queued for the port when its PMD has taken nothing for "
                                "this long (drop_tx_timeout; the transport retransmits); 0: wait forever (0-{}, "
                                "default: 1000)", kMaxTxTimeoutMs));
}

// Builds o.profile from the profile options. Returns the error, or "".
inline std::string make_nic_profile(NicCliOptions& o) {
    dpdk::NicProfile p;
    if (!o.cc_preset.empty()) {
        cc::CcConfigResult r = cc::load_cc_preset(o.cc_preset);
        if (!r.ok()) return "--cc-preset " + o.cc_preset + ": " + r.error;
        p.cc = r.config;
    } else if (!o.nic_profile.empty()) {
        cc::CcConfigResult r = cc::load_cc_config_file(o.nic_profile);
        if (!r.ok()) return "--nic-profile: " + r.error;  // the error names the file
        p.cc = r.config;
    }
    if (!o.cc.empty()) p.cc.algorithm = o.cc == "none" ? cc::CcAlgorithm::kNone : cc::CcAlgorithm::kDcqcn;
    p.send_cnp = !o.no_cnp;
    p.coalesce_acks = !o.no_ack_coalescing;
    if (o.zero_copy_min >= 0) {
        if (o.zero_copy_min != 0 && (o.zero_copy_min < 512 || o.zero_copy_min > 4096))
            return fmt::format("--zero-copy-min {} is out of range; allowed 0 (off) or [512, 4096]", o.zero_copy_min);
        p.zero_copy_min = static_cast<uint32_t>(o.zero_copy_min);
    }
    dpdk::RxPfcConfig pfc;
    if (std::string e = make_rx_pfc(o.rx, pfc); !e.empty()) return e;
    p.pfc_rx_xoff = pfc.xoff;
    p.pfc_rx_xon = pfc.xon;
    p.pfc_pause_quanta = pfc.pause_quanta;
    p.pfc_refresh_percent = pfc.refresh_percent;
    p.mark_ce_every = o.mark_ce_every;
    p.rx_max_pps = o.rx.rx_max_pps;
    if (o.tx_timeout_ms >= 0) {
        if (o.tx_timeout_ms > kMaxTxTimeoutMs)
            return fmt::format("--tx-timeout-ms {} is out of range; allowed [0, {}] (0: never)", o.tx_timeout_ms,
                               kMaxTxTimeoutMs);
        p.tx_timeout = Nanos::from_ms(static_cast<double>(o.tx_timeout_ms));
    }
    o.profile = p;
    return {};
}

// Registers the NIC options on `cmd`; `o` must live as long as `cmd` does.
inline void add_nic_options(CLI::App* cmd, NicCliOptions& o) {
    cmd->add_option("--port", o.port, "DPDK device string, e.g. net_af_packet0,iface=veth0")->required();
    cmd->add_option("--ip", o.host.ip, "IPv4 address and prefix, e.g. 10.0.0.1/24")->required();
    cmd->add_option("--mac", o.host.mac, "MAC address (default: the port's)");
    cmd->add_option("--gid-layout", o.host.gid_layout, "connectx (RoCEv2 IPv4 GID at index 3) or rxe (index 1)")
        ->capture_default_str();
    cmd->add_option("--port-mtu", o.host.port_mtu, "set the port MTU (default: the device's)")
        ->each([&o](const std::string&) { o.mtu_set = true; });
    cmd->add_option("-g,--gid-idx", o.gidx, "local GID index (default: the port's RoCEv2 IPv4 GID)");
    cmd->add_option("-m,--mtu", o.mtu, "path MTU: 256, 512, 1024, 2048 or 4096 (default: the active MTU)");
    cmd->add_option("--capture", o.capture, "write every frame received and sent to this pcapng file");
    add_nic_profile_options(cmd, o);
}

// Moves an EAL argument that landed in SERVER_IP back (after `--` every word
// is positional) and checks the path MTU. Returns the error, or "".
inline std::string check_nic_options(NicCliOptions& o) {
    if (!o.server.empty() && o.server[0] == '-') {
        o.eal_args.insert(o.eal_args.begin(), o.server);
        o.server.clear();
    }
    if (o.mtu && !transport::path_mtu_from_bytes(o.mtu))
        return fmt::format("-m {}: the path MTU must be 256, 512, 1024, 2048 or 4096", o.mtu);
    return make_nic_profile(o);
}

// The device the options describe (after check_nic_options), in Lcore mode.
inline verbs::DeviceOptions device_options(const NicCliOptions& o) {
    verbs::DeviceOptions d;
    d.devspec = o.port;
    d.host = o.host;
    d.mtu_set = o.mtu_set;
    d.capture = o.capture;
    d.progress = verbs::Progress::Lcore;
    d.nic = o.profile;
    return d;
}

// Opens the NIC in Lcore mode: its poll thread keeps answering ARP and ACKing
// while the command blocks in its TCP exchange.
inline std::unique_ptr<verbs::Context> open_nic(const NicCliOptions& o, std::string& error) {
    return verbs::Context::open(device_options(o), o.eal_args, error);
}

// The local GID index and path MTU the options ask for. The GID index is
// checked before anything goes on the wire, so a wrong one fails at once.
// Returns the error, or "".
inline std::string resolve_gid_and_mtu(const verbs::Context& ctx, const NicCliOptions& o, int& gidx,
                                       transport::PathMtu& mtu) {
    gidx = o.gidx >= 0 ? o.gidx : ctx.default_gid_index();
    if (ctx.check_gid_index(1, gidx)) return ctx.last_error();
    verbs::PortAttr pa;
    ctx.query_port(1, pa);
    mtu = o.mtu ? *transport::path_mtu_from_bytes(o.mtu) : pa.active_mtu;
    return {};
}

}  // namespace rocemu::cli
