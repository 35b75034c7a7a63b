// `rocemu counters`: read the counters of running rocemu processes through
// their DPDK telemetry sockets.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/dpdk/telemetry_client.hpp"
#include "tools/rocemu/commands.hpp"

namespace rocemu::cli {

namespace {

struct CountersOptions {
    std::string file_prefix;
    bool json = false;
    bool all = false;
};

// DCQCN rates come as rp_*_rate_mbps; they are shown in Gbit/s.
void print_fields(const dpdk::Fields& fields, bool all, const char* indent) {
    constexpr std::string_view kMbps = "_rate_mbps";
    for (const auto& [k, v] : fields) {
        if (!all && v == "0") continue;
        if (k.ends_with(kMbps)) {
            const std::string name = k.substr(0, k.size() - kMbps.size()) + "_rate";
            fmt::print("{}{:<30} {:>14.3f} Gbit/s\n", indent, name, std::strtod(v.c_str(), nullptr) / 1000.0);
            continue;
        }
        fmt::print("{}{:<30} {:>14}\n", indent, k, v);
    }
}

int show(const std::string& prefix, const CountersOptions& o) {
    std::string error;
    if (o.json) {
        const auto replies = dpdk::read_counters_json(prefix, error);
        if (!replies) {
            fmt::print(stderr, "rocemu counters: {}\n", error);
            return 2;
        }
        for (const std::string& r : *replies) fmt::print("{}\n", r);
        return 0;
    }
    const auto ports = dpdk::read_counters(prefix, error);
    if (!ports) {
        fmt::print(stderr, "rocemu counters: {}\n", error);
        return 2;
    }
    for (const dpdk::PortReport& p : *ports) {
        fmt::print("{} port {} ({})\n", prefix, p.id, p.name);
        print_fields(p.counters, o.all, "  ");
        if (p.engine) {
            fmt::print("  engine\n");
            print_fields(*p.engine, o.all, "    ");
        }
        for (const dpdk::QpReport& q : p.qps) {
            fmt::print("  qp 0x{:06x}\n", q.qpn);
            print_fields(q.counters, o.all, "    ");
        }
    }
    return 0;
}

int run_counters(const CountersOptions& o) {
    if (!o.file_prefix.empty()) return show(o.file_prefix, o);
    std::vector<std::string> prefixes;
    std::error_code ec;
    for (const auto& d : std::filesystem::directory_iterator(dpdk::dpdk_runtime_base(), ec)) {
        const std::string name = d.path().filename().string();
        if (name.starts_with("rocemu") && std::filesystem::exists(dpdk::telemetry_socket(name))) prefixes.push_back(name);
    }
    if (prefixes.empty()) {
        fmt::print(stderr, "rocemu counters: no running rocemu process found under {}\n",
                   dpdk::dpdk_runtime_base().string());
        return 2;
    }
    int status = 0;
    for (const std::string& p : prefixes) status = std::max(status, show(p, o));
    return status;
}

}  // namespace

void add_counters_command(CLI::App& app, int& status) {
    auto o = std::make_shared<CountersOptions>();
    CLI::App* cmd = app.add_subcommand(
        "counters",
        "Show the counters of running rocemu processes, read from their DPDK telemetry sockets: per port (packets, "
        "bytes, ARP, ICMP, drops by reason), and with a transport engine attached, the engine's and each QP's. "
        "Without --file-prefix, every rocemu* process found is shown. Zero counters are hidden unless --all.");
    cmd->add_option("--file-prefix", o->file_prefix, "the process's EAL --file-prefix (rocemu host prints it)");
    cmd->add_flag("--json", o->json, "print the telemetry replies as they are (JSON)");
    cmd->add_flag("-a,--all", o->all, "include counters that are zero");
    cmd->callback([o, &status] { status = run_counters(*o); });
}

}  // namespace rocemu::cli
