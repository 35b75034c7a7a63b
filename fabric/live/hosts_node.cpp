// The NICs of a split live fabric in one process (node.hpp).
#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fabric/live/node.hpp"
#include "fabric/live/split.hpp"

namespace rocemu::fabric::live {

namespace {

constexpr Nanos kFreshWait = Nanos::from_s(5);  // 250 snapshot periods

int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::optional<SwitchSnapshot> read_snapshot(const std::string& path) {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_snapshot(ss.str());
}

// Every switch's latest snapshot rows; with `fresh`, each from a snapshot
// taken after this call began (the switch writes one every 20 ms).
std::vector<std::string> switch_rows(const std::vector<std::string>& paths, bool fresh) {
    const int64_t since = monotonic_ns();
    std::vector<std::string> rows;
    for (const std::string& path : paths) {
        for (;;) {
            std::optional<SwitchSnapshot> s = read_snapshot(path);
            if (s && (!fresh || s->at_ns > since)) {
                rows.insert(rows.end(), s->rows.begin(), s->rows.end());
                break;
            }
            if (monotonic_ns() - since > kFreshWait.v)
                throw std::runtime_error(fmt::format("{}: no counter snapshot {}within {:.0f} s: is its switch node running?",
                                                     path, fresh ? "newer than the end of the size " : "",
                                                     kFreshWait.seconds()));
            const timespec ts{0, 1000000};
            nanosleep(&ts, nullptr);
        }
    }
    return rows;
}

}  // namespace

LiveResult run_hosts_node(const Topology& t, Pattern p, std::span<const Bytes> sizes, LiveOptions lo,
                          const NodeOptions& o) {
    LiveResult bad;
    std::vector<CableEnd> ends;
    try {
        node_names(t);  // refuses a switch named like the hosts node
        ends = cable_ends(t, kHostsNode, o.link_dir, parse_port_overrides(t, o.ports));
    } catch (const std::invalid_argument& e) {
        bad.error = e.what();
        return bad;
    }
    lo.split.nic_devspecs.assign(t.nics.size(), "");
    lo.split.nic_peer_marks.assign(t.nics.size(), "");
    for (const CableEnd& e : ends) {
        lo.split.nic_devspecs[e.end.index] = e.devspec;
        if (is_memif_client(e)) lo.split.nic_peer_marks[e.end.index] = servers_path(o.link_dir, e.peer_node);
    }
    lo.split.servers_mark = servers_path(o.link_dir, kHostsNode);
    std::vector<std::string> paths;
    for (const SwitchSpec& s : t.switches) {
        lo.split.ready_files.push_back(ready_path(o.link_dir, s.name));
        paths.push_back(counters_path(o.link_dir, s.name));
    }
    lo.split.switch_rows = [paths](bool fresh) { return switch_rows(paths, fresh); };
    lo.scale = o.scale;
    lo.seed = o.seed;
    lo.idle_sleep = o.busy_poll ? Nanos{} : kNodeIdleSleep;
    lo.eal_args = o.eal_args;
    return run_live_sweep(t, p, sizes, lo);
}

}  // namespace rocemu::fabric::live
