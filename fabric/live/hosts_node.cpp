// The NICs of a split live fabric in one process (node.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "dataplane/pcap/pcap.hpp"
#include "fabric/live/clock_relay.hpp"
#include "fabric/live/control.hpp"
#include "fabric/live/fabric_clock.hpp"
#include "fabric/live/monotonic.hpp"
#include "fabric/live/node.hpp"
#include "fabric/live/split.hpp"

namespace rocemu::fabric::live {

namespace {

constexpr Nanos kFreshWait = Nanos::from_s(5);     // 250 snapshot periods
constexpr Nanos kFetchTimeout = Nanos::from_s(1);  // one connection to a switch's control address
constexpr Nanos kAskEvery = Nanos::from_ms(100);   // how often a switch not ready yet is asked again
// Snapshots asked of each remote switch after the run for its clock alone:
// the bound is half the shortest fetch, so more tries find a shorter one
// (the 3 a run fetches anyway gave 0.6-16 ms under a TCG guest).
constexpr uint32_t kClockProbes = 16;
// A remote switch's capture over its control address: tries (a request the
// switch had not read when it answered gets a snapshot) and time for each.
constexpr int kCaptureTries = 5;
constexpr Nanos kCaptureTimeout = Nanos::from_s(60);

void sleep_ms(long ms) {
    const timespec ts{0, ms * 1000000};
    nanosleep(&ts, nullptr);
}

// Where the hosts node learns a switch node's state: the files it leaves in
// the link folder (same machine), or its control address.
struct SwitchSource {
    std::string name;
    std::string ready_file, counters_file;
    std::optional<HostPort> at;
    std::string expect;  // this node's fabric_identity()
    bool ready = false;
    // --clock fabric: its index among the relay's peers (a remote switch).
    std::shared_ptr<const ClockRelay> relay;
    size_t relay_peer = 0;
    // Its machine's clock against this one's, from the reply with the
    // shortest round trip so far (a remote switch only).
    std::optional<ClockOffset> clock;
    uint32_t clock_replies = 0;
    int64_t next_ask = 0;
    std::string last_error;

    std::string where() const {
        return at ? fmt::format("switch node {} at {}", name, format_host_port(*at))
                  : fmt::format("switch node {} ({})", name, counters_file);
    }

    // Its latest snapshot, or nullopt with last_error set. A snapshot over
    // the network is taken after the connection was accepted, so it is
    // newer than this call; one from the file may not be.
    std::optional<SwitchSnapshot> fetch() {
        std::optional<SwitchSnapshot> s;
        if (!at) {
            std::ifstream f(counters_file);
            std::stringstream ss;
            ss << f.rdbuf();
            s = parse_snapshot(ss.str());
            if (!s) {
                last_error = "no whole snapshot in the file";
                return s;
            }
        } else {
            FetchTimes times;
            const std::optional<std::string> text = fetch_control(*at, kFetchTimeout, last_error, &times);
            if (!text) return std::nullopt;
            s = parse_snapshot(*text);
            if (!s) {
                last_error = "its reply is not a counter snapshot: is that address a rocemu switch node's --control-listen?";
                return std::nullopt;
            }
            if (const std::optional<ClockOffset> c = clock_offset(s->realtime_ns, times)) {
                ++clock_replies;
                if (!clock || c->error < clock->error) clock = c;
            }
        }
        if (s->node != name || s->fabric != expect)
            throw std::runtime_error(fmt::format(
                "{} answers as switch node {} of fabric {}; this node runs fabric {}: start every node from the same "
                "fabric file with the same --scale and --seed, and give each --control the address its switch "
                "listens on",
                where(), s->node.empty() ? "?" : s->node, s->fabric.empty() ? "?" : s->fabric, expect));
        return s;
    }

    // True once the switch said it is ready, in a snapshot of this fabric
    // (fetch throws for another), and with --clock fabric answered a clock
    // exchange; asks at most every kAskEvery.
    bool poll_ready() {
        if (ready) {
            if (!relay || (relay->heard(relay_peer) && relay->synced())) return true;
            last_error = relay->heard(relay_peer)
                             ? "the machines' fabric clocks have not caught up with each other yet"
                             : "it has not answered the fabric clock over UDP: does its node run with --clock fabric, "
                               "and does UDP reach that address?";
            return false;
        }
        if (!at && !std::filesystem::exists(ready_file)) return false;
        const int64_t t = monotonic_ns();
        if (t < next_ask) return false;
        next_ask = t + kAskEvery.v;
        const std::optional<SwitchSnapshot> s = fetch();
        if (s && !s->ready) last_error = "its ports are not all up yet";
        ready = s && s->ready;
        return ready && poll_ready();
    }

    // `n` more snapshots for the clock offset (a remote switch only);
    // a failed one is skipped.
    void probe_clock(uint32_t n) {
        for (uint32_t i = 0; at && i < n; ++i) fetch();
    }

    std::string waiting() const {
        return at ? fmt::format("{} ({})", where(), last_error) : ready_file;
    }

    // A snapshot, with `newer` one the switch took after monotonic time
    // `since` (one over the network is newer than the call by
    // construction); nullopt with last_error set kFreshWait after `since`.
    std::optional<SwitchSnapshot> fetch_since(int64_t since, bool newer) {
        for (;;) {
            std::optional<SwitchSnapshot> s = fetch();
            if (s && (!newer || at || s->at_ns > since)) return s;
            if (monotonic_ns() - since > kFreshWait.v) return std::nullopt;
            sleep_ms(at ? 20 : 1);
        }
    }
};

// Every switch's latest snapshot rows; with `fresh`, each from a snapshot
// taken after this call began (a switch takes one every 20 ms).
std::vector<std::string> switch_rows(std::vector<SwitchSource>& sources, bool fresh) {
    const int64_t since = monotonic_ns();
    std::vector<std::string> rows;
    for (SwitchSource& src : sources) {
        const std::optional<SwitchSnapshot> s = src.fetch_since(since, fresh);
        if (!s)
            throw std::runtime_error(fmt::format("{}: no counter snapshot {}within {:.0f} s ({}): is it running?",
                                                 src.where(), fresh ? "newer than the end of the size " : "",
                                                 kFreshWait.seconds(), src.last_error));
        rows.insert(rows.end(), s->rows.begin(), s->rows.end());
    }
    return rows;
}

// The switches' rows as LiveOptions::split.switch_rows gives them: fresh
// ones when asked, else the last rows read, read again at most every
// kSnapshotEvery (the hosts node samples its totals every 10 ms, a switch
// snapshot changes every 20 ms). With a switch on another machine only the
// fresh reads (the end of each size) go out: a connection blocks for up to
// kControlEvery plus the round trip, and the samples are taken inside the
// loop that polls the NICs, so between sizes the rows stay those of the
// last read.
struct SwitchRowsCache {
    std::vector<SwitchSource> sources;
    std::vector<std::string> last;
    int64_t next_read = 0;

    bool any_remote() const {
        return std::any_of(sources.begin(), sources.end(), [](const SwitchSource& s) { return s.at.has_value(); });
    }

    std::vector<std::string> rows(bool fresh) {
        const int64_t t = monotonic_ns();
        if (fresh || (t >= next_read && !any_remote())) {
            last = switch_rows(sources, fresh);
            next_read = t + kSnapshotEvery.v;
        }
        return last;
    }
};

// The switch sources of the hosts node, checked against the machines:
// std::invalid_argument when a switch on another machine has no --control
// or a cable to one has no --port.
std::vector<SwitchSource> switch_sources(const Topology& t, const NodeOptions& o, const std::string& identity,
                                         const std::map<std::string, std::string>& overrides) {
    std::map<std::string, HostPort> control;
    for (const std::string& v : o.controls) {
        const auto kv = split_assignment(v);
        const std::optional<HostPort> at = kv ? parse_host_port(kv->second) : std::nullopt;
        if (!at) throw std::invalid_argument(fmt::format("--control '{}': expected SWITCH=HOST:PORT, e.g. leaf0=10.0.0.2:7700", v));
        const std::string& sw = kv->first;
        if (sw == kHostsNode || std::none_of(t.switches.begin(), t.switches.end(), [&](const SwitchSpec& s) { return s.name == sw; }))
            throw std::invalid_argument(fmt::format("--control '{}': fabric '{}' has no switch '{}'", v, t.cfg.name, sw));
        control[sw] = *at;
    }
    const std::map<std::string, std::string> machines = parse_machines(t, o.machines);
    std::vector<std::string> remote = nodes_elsewhere(machines, kHostsNode);
    std::vector<std::string> why;
    if (machines.empty())
        for (const auto& [sw, at] : control) remote.push_back(sw);
    for (const std::string& n : remote)
        if (!control.contains(n))
            why.push_back(fmt::format("switch {} runs on machine {}, not this one: give --control {}=HOST:PORT (the "
                                      "address its node's --control-listen serves)",
                                      n, machines.at(n), n));
    for (std::string& w : cables_without_port(t, kHostsNode, remote, overrides)) why.push_back(std::move(w));
    if (!why.empty()) throw std::invalid_argument(fmt::format("{}", fmt::join(why, "\n  ")));
    std::vector<SwitchSource> out;
    for (const SwitchSpec& s : t.switches) {
        SwitchSource src{s.name, ready_path(o.link_dir, s.name), counters_path(o.link_dir, s.name)};
        if (const auto c = control.find(s.name); c != control.end()) src.at = c->second;
        src.expect = identity;
        out.push_back(std::move(src));
    }
    return out;
}

std::string ms(Nanos n) { return fmt::format("{:+.3f} ms", static_cast<double>(n.v) / 1e6); }

// Each remote switch's clock against this machine's, and with --pcap on a
// link one of them owns, the command that merges the link's files on this
// machine's clock (a capture's time stamps are its machine's CLOCK_REALTIME).
void print_clocks(const Topology& t, const std::vector<SwitchSource>& sources, const NodeOptions& o) {
    for (const SwitchSource& s : sources)
        if (s.at && s.clock)
            fmt::print("clock: {}: its CLOCK_REALTIME is {} from this machine's (within {:.3f} ms, best of {} "
                       "replies)\n",
                       s.where(), ms(s.clock->offset), static_cast<double>(s.clock->error.v) / 1e6, s.clock_replies);
    if (o.pcap_link.empty()) return;
    const std::optional<uint32_t> l = t.find_link(o.pcap_link);
    if (!l) return;
    std::vector<std::string> files, shifts;
    bool remote = false;
    for (const std::string& node : {node_of(t, t.links[*l].a), node_of(t, t.links[*l].b)}) {
        const std::string file = fmt::format("{}@{}.pcap", o.pcap_link, node);
        if (std::find(files.begin(), files.end(), file) != files.end()) continue;
        files.push_back(file);
        const auto src = std::find_if(sources.begin(), sources.end(), [&](const SwitchSource& s) { return s.name == node; });
        if (src == sources.end() || !src->at) continue;
        remote = true;
        if (src->clock) shifts.push_back(fmt::format(" --shift {}={}", file, -src->clock->offset.v));
    }
    if (remote)
        fmt::print("pcap: link {} is captured on more than one machine ({}, each in its node's link folder); on "
                   "this machine's clock: rocemu pcap --merge {}.pcap {}{}\n",
                   o.pcap_link, fmt::join(files, ", "), o.pcap_link, fmt::join(files, " "), fmt::join(shifts, ""));
}

// --clock fabric: each remote switch's round trip (question to answer)
// against the lead: a node may run the lead past the other machines' time
// as it was a round trip ago, so longer round trips make the fabric wait.
void print_round_trips(const ClockRelay& relay, const std::vector<SwitchSource>& sources, Nanos lead) {
    const auto ms = [](Nanos n) { return static_cast<double>(n.v) / 1e6; };
    for (const SwitchSource& s : sources) {
        if (!s.at || !s.relay) continue;
        const ClockRelay::RoundTrips& rt = relay.round_trips(s.relay_peer);
        if (rt.count == 0) continue;
        fmt::print("clock: fabric clock's round trip to {}: median {:.3f} ms, 99 % within {:.3f} ms, longest {:.3f} ms "
                   "({} answers timed); the lead is {:.3f} ms{}\n",
                   s.where(), ms(rt.within(0.5)), ms(rt.within(0.99)), ms(rt.max), rt.count, ms(lead),
                   rt.within(0.5) > lead ? ": most round trips are longer, so the fabric waits for the network "
                                           "(a larger --scale makes the lead longer)"
                                         : "");
    }
}

// pcap::whole_records of a file read into a string.
size_t whole_records(std::string_view b) {
    return pcap::whole_records(std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
}
// Whether `b` starts as a pcap file does (either byte order, us or ns).
bool is_pcap(std::string_view b) { return whole_records(b) != 0; }

// A switch node on this machine rewrites its snapshot every 20 ms and
// flushes its capture after taking the snapshot's time and before writing
// it, so once a snapshot newer than now is there, its file holds every
// frame the switch took up to now; the records whole at that point are
// copied to `out` (the node may be appending one). Empty, or why not.
std::string copy_local_capture(SwitchSource& src, const std::string& path, const std::string& out) {
    if (!src.fetch_since(monotonic_ns(), true))
        return fmt::format("no counter snapshot within {:.0f} s ({})", kFreshWait.seconds(), src.last_error);
    std::ifstream f(path, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    const size_t whole = whole_records(text);
    if (whole == 0) return fmt::format("{} is not a pcap file", path);
    std::ofstream o(out, std::ios::binary | std::ios::trunc);
    o.write(text.data(), static_cast<std::streamsize>(whole));
    return o.flush() ? std::string() : fmt::format("cannot write {}", out);
}

// With --pcap on a link, when a switch runs on another machine: the files
// of the link's ends merged on this machine's clock into the report folder
// as one process names it (no launcher does it across machines). A remote
// switch's file is fetched over its control address into this machine's
// link folder and shifted by minus its machine's clock offset; a switch on
// this machine is read up to now from its file (copy_local_capture). Says
// why when it cannot; the command print_clocks printed still merges copies
// by hand. The merged file joins `files`.
void merge_captures(const Topology& t, std::vector<SwitchSource>& sources, const NodeOptions& o, Pattern p,
                    const std::string& out_dir, std::vector<std::string>& files) {
    const std::optional<uint32_t> l = t.find_link(o.pcap_link);
    if (!l || out_dir.empty()) return;
    if (std::none_of(sources.begin(), sources.end(), [](const SwitchSource& s) { return s.at.has_value(); })) return;
    std::vector<pcap::MergeInput> in;
    std::vector<std::string> fetched, local, copies;
    const auto remove_copies = [&] {
        std::error_code ec;
        for (const std::string& c : copies) std::filesystem::remove(c, ec);
    };
    Nanos bound{};
    for (const std::string& node : {node_of(t, t.links[*l].a), node_of(t, t.links[*l].b)}) {
        const std::string path = capture_path(o.link_dir, o.pcap_link, node);
        if (std::any_of(in.begin(), in.end(), [&](const pcap::MergeInput& m) { return m.path == path; })) continue;
        if (node == kHostsNode) {
            in.push_back({path, Nanos{}});
            continue;
        }
        const auto src = std::find_if(sources.begin(), sources.end(), [&](const SwitchSource& s) { return s.name == node; });
        if (src == sources.end()) return;
        if (!src->at) {
            const std::string copy = path + ".run";
            copies.push_back(copy);
            if (const std::string why = copy_local_capture(*src, path, copy); !why.empty()) {
                fmt::print("pcap: cannot read {}'s capture of {}: {}\n", src->where(), o.pcap_link, why);
                return remove_copies();
            }
            in.push_back({copy, Nanos{}});
            local.push_back(node);
            continue;
        }
        if (!src->clock) {
            fmt::print("pcap: no clock offset of {}: its capture of {} is not merged\n", src->where(), o.pcap_link);
            return remove_copies();
        }
        std::string error = "no reply";
        std::optional<std::string> text;
        for (int i = 0; i < kCaptureTries && !(text && is_pcap(*text)); ++i) {
            text = fetch_control(*src->at, kCaptureTimeout, error, nullptr, "pcap " + o.pcap_link);
            if (text && text->rfind("error: ", 0) == 0) break;
        }
        if (!text || !is_pcap(*text)) {
            fmt::print("pcap: cannot fetch {}'s capture of {}: {}\n", src->where(), o.pcap_link,
                       !text ? error : text->rfind("error: ", 0) == 0 ? text->substr(7, text->find('\n') - 7)
                                                                      : std::string("its replies are not a pcap file"));
            return remove_copies();
        }
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f.write(text->data(), static_cast<std::streamsize>(text->size()));
        if (!f.flush()) {
            fmt::print("pcap: cannot write {}\n", path);
            return remove_copies();
        }
        in.push_back({path, Nanos{-src->clock->offset.v}});
        fetched.push_back(node);
        bound = std::max(bound, src->clock->error);
    }
    const std::string out =
        (std::filesystem::path(out_dir) / fmt::format("live_{}_{}.pcap", pattern_name(p), o.pcap_link)).string();
    std::string why;
    const std::optional<uint64_t> frames = pcap::merge(in, out, why);
    remove_copies();
    if (!frames) {
        fmt::print("pcap: cannot merge the captures of {}: {}\n", o.pcap_link, why);
        return;
    }
    files.push_back(out);
    std::vector<std::string> how;
    if (!fetched.empty()) how.push_back(fmt::format("{}'s fetched over the control channel", fmt::join(fetched, "'s and ")));
    if (!local.empty()) how.push_back(fmt::format("{}'s read from this machine's link folder", fmt::join(local, "'s and ")));
    fmt::print("pcap: {} frames of link {} in {}: merged on this machine's clock (within {:.3f} ms) from {} files, "
               "{}\n",
               *frames, o.pcap_link, out, static_cast<double>(bound.v) / 1e6, in.size(), fmt::join(how, ", "));
}

}  // namespace

LiveResult run_hosts_node(const Topology& t, Pattern p, std::span<const Bytes> sizes, LiveOptions lo,
                          const NodeOptions& o) {
    LiveResult bad;
    std::vector<CableEnd> ends;
    auto cache = std::make_shared<SwitchRowsCache>();
    try {
        node_names(t);  // refuses a switch named like the hosts node
        const auto overrides = parse_port_overrides(t, o.ports);
        ends = cable_ends(t, kHostsNode, o.link_dir, overrides);
        cache->sources = switch_sources(t, o, fabric_identity(t, o.scale > 0 ? o.scale : default_scale(t), o.seed),
                                  overrides);
    } catch (const std::invalid_argument& e) {
        bad.error = e.what();
        return bad;
    }
    if (!make_link_dir(o.link_dir, bad.error)) return bad;
    lo.split.nic_devspecs.assign(t.nics.size(), "");
    lo.split.nic_peer_marks.assign(t.nics.size(), "");
    lo.split.nic_cables.assign(t.nics.size(), "");
    for (const CableEnd& e : ends) {
        lo.split.nic_devspecs[e.end.index] = e.devspec;
        if (e.socket.empty()) lo.split.nic_cables[e.end.index] = t.links[e.link].name;
        if (is_memif_client(e)) lo.split.nic_peer_marks[e.end.index] = servers_path(o.link_dir, e.peer_node);
    }
    lo.split.servers_mark = servers_path(o.link_dir, kHostsNode);
    if (!o.own_clock) {
        lo.split.clock = open_node_clock(t, o.link_dir, kHostsNode, bad.error);
        if (!lo.split.clock) return bad;
    }
    std::shared_ptr<ClockRelay> relay;
    Nanos lead{};
    if (o.fabric_clock && lo.split.clock) {
        std::vector<HostPort> peers;
        for (SwitchSource& s : cache->sources)
            if (s.at) {
                s.relay_peer = peers.size();
                peers.push_back(*s.at);
            }
        if (!peers.empty()) {
            const double scale = o.scale > 0 ? o.scale : default_scale(t);
            const Nanos step = FabricClock::max_step_for(scale_topology(t, scale));
            lead = step * FabricClock::kLeadSteps;
            relay = ClockRelay::to_switches(std::move(peers), clock_fabric_id(cache->sources.front().expect),
                                            step * FabricClock::kJumpSteps, bad.error);
            if (!relay) return bad;
            for (SwitchSource& s : cache->sources)
                if (s.at) s.relay = relay;
            lo.split.clock->attach(relay, relay_every(step));
        }
    }
    lo.split.link_wait = o.wait;
    lo.split.switches_waiting = [cache] {
        std::vector<std::string> w;
        for (SwitchSource& s : cache->sources)
            if (!s.poll_ready()) w.push_back(s.waiting());
        return w;
    };
    lo.split.switch_rows = [cache](bool fresh) { return cache->rows(fresh); };
    lo.scale = o.scale;
    lo.seed = o.seed;
    lo.idle_sleep = o.busy_poll ? Nanos{} : kNodeIdleSleep;
    lo.eal_args = o.eal_args;
    lo.pcap_link = o.pcap_link;
    if (!o.pcap_link.empty()) lo.pcap_path = capture_path(o.link_dir, o.pcap_link, kHostsNode);
    LiveResult r = run_live_sweep(t, p, sizes, lo);
    // Stopped (SIGTERM from the launcher when another node failed, or a
    // user's Ctrl-C): the switch nodes may be gone, so no clock probes.
    if (r.error.empty() && !r.stopped_in) {
        for (SwitchSource& s : cache->sources) s.probe_clock(kClockProbes);
        print_clocks(t, cache->sources, o);
        if (!o.pcap_link.empty()) merge_captures(t, cache->sources, o, p, lo.out_dir, r.files);
        if (relay) {
            fmt::print("clock: fabric clock across machines: {} questions sent, {} answers, {} datagrams ignored\n",
                       relay->sent(), relay->received(), relay->ignored());
            print_round_trips(*relay, cache->sources, lead);
        }
    }
    // A fabric that failed to come up leaves its ports open (LiveFabric::build)
    // for the caller's _Exit: what a close would have removed from disk goes here.
    if (!r.error.empty() || !r.fabric_up) remove_server_sockets(ends);
    return r;
}

}  // namespace rocemu::fabric::live
