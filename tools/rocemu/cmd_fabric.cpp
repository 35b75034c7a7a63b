// `rocemu fabric show|run` and `rocemu scenario`: whole fabrics in virtual
// time. `fabric run` sweeps a collective's message size like nccl-tests, or
// runs one scenario on the given fabric; `scenario` runs a playbook scenario
// on its own fabric and prints its expectation and verdict.
#include <fmt/format.h>

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "fabric/report.hpp"
#include "fabric/scenario.hpp"
#include "fabric/topology.hpp"
#include "tools/rocemu/commands.hpp"
#ifdef ROCEMU_WITH_DPDK
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/eal_args.hpp"
#include "fabric/live/live.hpp"
#include "fabric/live/node.hpp"
#include "fabric/live/split.hpp"
#endif

namespace rocemu::cli {

namespace {

using namespace rocemu::fabric;

struct FabricArgs {
    std::string config;
    bool use_default = false;
    std::string scenario;
    std::string workload = "ring_allreduce";
    std::vector<std::string> sizes{"1M", "4M", "16M"};
    // nccl-tests' sweep options, which replace `sizes` (resolve_sweep).
    std::string minbytes, maxbytes, stepbytes = "1M";
    uint64_t stepfactor = 1;
    CLI::Option* sizes_opt = nullptr;
    std::array<CLI::Option*, 4> range_opts{};  // -b, -e, -i, -f
    uint64_t seed = 1;
    std::string out = "rocemu-report";
    std::string pcap;
    bool reduced = false;
    std::string nic_model;  // empty: the file's nic.model
};

std::optional<FabricConfig> load(const FabricArgs& a) {
    if (a.use_default && !a.config.empty()) {
        fmt::print(stderr, "rocemu: -c {} and --default name two fabrics: give one\n", a.config);
        return std::nullopt;
    }
    const ConfigResult r = a.use_default || a.config.empty() ? default_fabric_config() : load_fabric_config(a.config);
    if (!r.config) {
        fmt::print(stderr, "rocemu: {}\n", r.error);
        return std::nullopt;
    }
    std::optional<FabricConfig> cfg = r.config;
    if (!a.nic_model.empty()) cfg->nic.model = a.nic_model == "rc" ? NicModel::Rc : NicModel::Generator;
    for (const std::string& w : config_warnings(*cfg))
        fmt::print(stderr, "rocemu: warning: {}: {}\n", a.use_default || a.config.empty() ? "default.yaml" : a.config, w);
    return cfg;
}

std::optional<Pattern> workload_of(const FabricArgs& a, std::string_view cmd) {
    const auto p = parse_pattern(a.workload);
    if (!p)
        fmt::print(stderr,
                   "{}: --workload '{}' is not one of incast, permutation, all_to_all, ring_allreduce, hd_allreduce\n",
                   cmd, a.workload);
    return p;
}

std::optional<std::vector<Bytes>> sizes_of(const FabricArgs& a, std::string_view cmd) {
    std::vector<Bytes> sizes;
    for (const std::string& s : a.sizes) {
        const auto b = parse_size(s);
        if (!b) {
            fmt::print(stderr, "{}: --sizes '{}' is not a size like 4096, 64K, 16M or 1G (1 B to 1 TiB)\n", cmd, s);
            return std::nullopt;
        }
        sizes.push_back(*b);
    }
    return sizes;
}

// nccl-tests' -b/-e/-f/-i, when given, become the sweep's sizes (in bytes,
// so that a split run's node commands carry them as --sizes). False, with
// the reason on stderr, for a bad or empty range or one given with --sizes.
bool resolve_sweep(FabricArgs& a, std::string_view cmd) {
    bool range = false;
    for (const CLI::Option* o : a.range_opts) range |= o != nullptr && o->count() > 0;
    if (!range) return true;
    if (a.sizes_opt != nullptr && a.sizes_opt->count() > 0) {
        fmt::print(stderr, "{}: --sizes and -b/-e/-f/-i are two ways to give the sizes: use one\n", cmd);
        return false;
    }
    if (a.minbytes.empty() && a.maxbytes.empty()) {
        fmt::print(stderr, "{}: -f/-i step a sweep from -b (--minbytes) to -e (--maxbytes): give those too\n", cmd);
        return false;
    }
    // One end alone is a single size, as -b 1M -e 1M.
    const std::string& lo = a.minbytes.empty() ? a.maxbytes : a.minbytes;
    const std::string& hi = a.maxbytes.empty() ? a.minbytes : a.maxbytes;
    const std::array<std::pair<const char*, const std::string*>, 3> given{
        {{"-b/--minbytes", &lo}, {"-e/--maxbytes", &hi}, {"-i/--stepbytes", &a.stepbytes}}};
    std::array<Bytes, 3> v{};
    for (size_t i = 0; i < given.size(); ++i) {
        const std::optional<Bytes> b = parse_size(*given[i].second);
        if (!b) {
            fmt::print(stderr, "{}: {} '{}' is not a size like 4096, 64K, 16M or 1G (1 B to 1 TiB)\n", cmd,
                       given[i].first, *given[i].second);
            return false;
        }
        v[i] = *b;
    }
    std::string error;
    const std::vector<Bytes> sizes = size_range(v[0], v[1], a.stepfactor, v[2], error);
    if (sizes.empty()) {
        fmt::print(stderr, "{}: -b {} -e {}: {}\n", cmd, lo, hi, error);
        return false;
    }
    a.sizes.clear();
    for (const Bytes b : sizes) a.sizes.push_back(std::to_string(b.v));
    return true;
}

// False (with the reason on stderr) if a size of the sweep cannot run the
// workload on this fabric.
bool workload_fits(const Topology& t, Pattern p, const std::vector<Bytes>& sizes, std::string_view cmd) {
    for (const Bytes s : sizes)
        if (const std::string why = workload_problem(t, p, s); !why.empty()) {
            fmt::print(stderr, "{}: {}\n", cmd, why);
            return false;
        }
    return true;
}

// The fabric file and the sweep: -c/--default, -w, --sizes, --seed, -o.
// `note` prefixes the help of the options only some uses of the command read.
void add_sweep_options(CLI::App* c, FabricArgs& a, const std::string& note) {
    c->add_option("-c,--config", a.config, "fabric YAML (configs/fabrics/)")->check(kNonEmpty);
    c->add_flag("--default", a.use_default, "the embedded default fabric (also when no --config)");
    c->add_option("-w,--workload", a.workload,
                  note + "incast, permutation, all_to_all, ring_allreduce or hd_allreduce (halving-doubling)")
        ->capture_default_str();
    // One value (comma-separated), so that `--sizes 1M -- EAL args` ends the sizes.
    a.sizes_opt = c->add_option("--sizes", a.sizes, note + "message sizes (suffix K, M, G)")
                      ->delimiter(',')
                      ->allow_extra_args(false)
                      ->capture_default_str();
    // As nccl-tests names them: -b 8 -e 128M -f 2 sweeps 8 B, 16 B ... 128 MiB.
    a.range_opts = {
        c->add_option("-b,--minbytes", a.minbytes, note + "instead of --sizes, as nccl-tests: the smallest size"),
        c->add_option("-e,--maxbytes", a.maxbytes, note + "the largest size (-b alone or -e alone: one size)"),
        c->add_option("-i,--stepbytes", a.stepbytes, note + "from -b to -e in steps of this many bytes")
            ->capture_default_str(),
        c->add_option("-f,--stepfactor", a.stepfactor,
                      note + "from -b to -e, each size this many times the one before (1: steps of -i)")
            ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20)),
    };
    c->add_option("--seed", a.seed, "run seed")->check(kWholeNumber)->capture_default_str();
    c->add_option("-o,--out", a.out, note + "report folder")->check(kNonEmpty)->capture_default_str();
}

// On a terminal the progress line is rewritten in place and cleared before
// the results. Anywhere else (a CI log, a file) carriage returns would only
// leave debris, so it is a plain line, the first at once and then at most one
// every 5 s.
bool stderr_is_terminal() {
    static const bool tty = isatty(STDERR_FILENO) == 1;
    return tty;
}

void progress_line(const std::string& line) {
    if (stderr_is_terminal()) {
        fmt::print(stderr, "\r{:<110}", line);
        std::fflush(stderr);
        return;
    }
    using Clock = std::chrono::steady_clock;
    static Clock::time_point last{};
    const Clock::time_point now = Clock::now();
    if (last != Clock::time_point{} && now - last < std::chrono::seconds(5)) return;
    last = now;
    fmt::print(stderr, "{}\n", line);
}

void clear_progress() {
    if (stderr_is_terminal()) fmt::print(stderr, "\r{:<110}\r", "");
}

// Ctrl-C (SIGINT) or SIGTERM during a run: it stops at its next progress
// tick (virtual time: Fabric::kTickEvents events; live: 250 ms), and what
// finished is printed and kept; a second signal ends the process at once. A
// SIGINT the process was started ignoring (a shell's background job) stays
// ignored.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
    if (g_stop_signal != 0) {
        std::signal(sig, SIG_DFL);
        std::raise(sig);
        return;
    }
    g_stop_signal = sig;
}

class StopOnSignal {
public:
    StopOnSignal() {
        g_stop_signal = 0;
        old_term_ = std::signal(SIGTERM, on_stop_signal);
        old_int_ = std::signal(SIGINT, SIG_IGN);
        if (old_int_ != SIG_IGN) std::signal(SIGINT, on_stop_signal);
    }
    ~StopOnSignal() {
        std::signal(SIGTERM, old_term_);
        std::signal(SIGINT, old_int_);
    }
    StopOnSignal(const StopOnSignal&) = delete;
    StopOnSignal& operator=(const StopOnSignal&) = delete;

    static bool requested() { return g_stop_signal != 0; }
    static const char* name() { return g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM"; }
    // What a shell reports for a process its signal ended.
    static int exit_status() { return 128 + g_stop_signal; }

private:
    void (*old_term_)(int) = SIG_DFL;
    void (*old_int_)(int) = SIG_DFL;
};

// The line under a sweep's table when a stop ended it in `size`.
void print_interrupted(Bytes size, std::size_t finished, std::size_t asked) {
    fmt::print("# interrupted by {} in the {} B run: {} of {} sizes finished\n", StopOnSignal::name(), size.v, finished,
               asked);
}

// Makes `files` the folder's report: what the run before listed and this one
// did not write again is removed (replace_report). Returns how many. A run
// that wrote nothing (refused, or failed before its first file) leaves the
// folder as it was.
std::size_t keep_report(const std::string& dir, const std::vector<std::string>& files) {
    if (dir.empty() || files.empty()) return 0;
    std::string why;
    const std::optional<std::size_t> n = replace_report(dir, files, why);
    if (!n) fmt::print(stderr, "rocemu: report folder {}: {}\n", dir, why);
    return n.value_or(0);
}

// Draws a run's plots and names its report folder and what the run wrote there.
void print_report(const std::string& dir, std::vector<std::string> files) {
    if (dir.empty() || files.empty()) return;
    std::string msg;
    render_plots(dir, files, msg);
    const std::size_t removed = keep_report(dir, files);
    fmt::print("report: {} ({} files; {}{})\n", std::filesystem::absolute(dir).string(), files.size(), msg,
               removed > 0 ? fmt::format("; the previous report's other {} files removed", removed) : "");
}

// `fabric run --live`: the same topology on DPDK in real time.
struct LiveCliArgs {
    bool enabled = false;
    double scale = 0;
    uint32_t qps = 1;
    double timeout_s = 120;
    std::vector<std::string> eal_args;
    bool processes = false;
    std::string link_dir;
    bool busy_poll = false;
    std::string clock = "shared";  // --processes: shared by the nodes, or own (one per node)
    double wait_s = 30;  // fabric node --hosts --wait
    uint32_t rc_timeout = 0;  // 0: from the scaled fabric's round-trip bound
};

void add_live_options(CLI::App* run, LiveCliArgs& l) {
    run->add_flag("--live", l.enabled,
                  "run on DPDK in real time, in this process: verbs NICs and switch runtimes on net_ring cables, one "
                  "thread polling all");
    run->add_option("--scale", l.scale,
                    "--live: divide link rates by this (delays and switch timers multiplied); default: the host links' "
                    "sum over 4 Gbit/s");
    run->add_option("--qps", l.qps, "--live: RC QPs per flow, 1-64")->capture_default_str();
    run->add_option("--timeout", l.timeout_s, "--live: live seconds per size before giving up")->capture_default_str();
    run->add_option("--rc-timeout", l.rc_timeout,
                    "--live: the QPs' ACK timeout exponent (4.096 us x 2^T), 1-31; default: from the scaled fabric's "
                    "round-trip bound")
        ->check(CLI::Range(1, 31));
    run->add_option("eal", l.eal_args, "--live: EAL arguments, after --");
    run->add_flag("--processes", l.processes,
                  "--live: one process per switch and one for the NICs, cabled by memif (rocemu fabric node)");
    run->add_option("--link-dir", l.link_dir,
                    "--processes: folder for memif sockets, node logs and counters (default: a fresh one in /tmp, "
                    "removed after a successful run)");
    run->add_flag("--busy-poll", l.busy_poll, "--processes: nodes never sleep (default: 20 us after 64 idle turns)");
    run->add_option("--clock", l.clock,
                    "--processes: shared: the nodes run one fabric clock, none more than two steps ahead of the "
                    "slowest (true rates per sample; on fewer cores than processes it costs wall time); own: each node "
                    "a clock of its own")
        ->check(CLI::IsMember({"shared", "own"}))
        ->capture_default_str();
}

// A live option without --live, or a split one without --processes, would
// be ignored: refused instead, naming what it needs.
std::string misplaced_live_option(const CLI::App& run, const LiveCliArgs& l) {
    if (!l.enabled)
        for (const char* o : {"--scale", "--qps", "--timeout", "--rc-timeout", "--processes"})
            if (run.count(o) > 0) return fmt::format("{} needs --live", o);
    if (!l.processes)
        for (const char* o : {"--link-dir", "--busy-poll", "--clock"})
            if (run.count(o) > 0) return fmt::format("{} needs --live --processes", o);
    if (!l.enabled && !l.eal_args.empty()) return fmt::format("EAL arguments ({} ...) need --live", l.eal_args.front());
    return "";
}

#ifdef ROCEMU_WITH_DPDK

// The checks and the topology every live mode shares; nullopt after printing
// why, named as `cmd`.
std::optional<Topology> live_topology(const FabricConfig& cfg, const FabricArgs& a, const LiveCliArgs& l,
                                      std::string_view cmd) {
    if (!a.scenario.empty() || cfg.nic.model != NicModel::Rc) {
        fmt::print(stderr, "{}: runs a workload sweep on RC NICs; --scenario and --nic-model generator are "
                           "virtual-time only\n", cmd);
        return std::nullopt;
    }
    // NaN fails every comparison: written so that it is refused too.
    if (l.scale != 0 && !(l.scale >= 1 && std::isfinite(l.scale))) {
        fmt::print(stderr, "{}: --scale {} must be at least 1 (and finite)\n", cmd, l.scale);
        return std::nullopt;
    }
    if (!(l.timeout_s > 0 && std::isfinite(l.timeout_s))) {
        fmt::print(stderr, "{}: --timeout {} must be a positive number of seconds\n", cmd, l.timeout_s);
        return std::nullopt;
    }
    if (l.qps < 1 || l.qps > 64) {
        fmt::print(stderr, "{}: --qps {}: must be in [1, 64]\n", cmd, l.qps);
        return std::nullopt;
    }
    try {
        Topology t = generate(cfg);
        if (const std::string e = t.pcap_link_error(a.pcap); !e.empty()) {
            fmt::print(stderr, "{}: {}\n", cmd, e);
            return std::nullopt;
        }
        return t;
    } catch (const std::exception& e) {
        fmt::print(stderr, "{}: {}\n", cmd, e.what());
        return std::nullopt;
    }
}

live::LiveOptions live_options(const FabricArgs& a, const LiveCliArgs& l) {
    live::LiveOptions o;
    o.scale = l.scale;
    o.qps_per_flow = l.qps;
    o.seed = a.seed;
    o.out_dir = a.out;
    o.timeout_s = l.timeout_s;
    o.eal_args = l.eal_args;
    o.progress = progress_line;
    o.pcap_link = a.pcap;
    o.rc_timeout = static_cast<uint8_t>(l.rc_timeout);
    return o;
}

// Prints the table, the notes and the report folder; the exit status. The
// fabric is gone by now: the EAL is closed (unless `close_eal` is false) so
// that its per-pid runtime folder does not pile up in /var/run/dpdk.
int report_live(Pattern p, const live::LiveResult& r, const FabricArgs& a, const char* me, bool close_eal = true) {
    if (close_eal) dpdk::Eal::cleanup();
    clear_progress();
    if (!r.rows.empty()) fmt::print("{}", live::format_live_sweep(p, r));
    for (const std::string& n : r.notes) fmt::print("  {}\n", n);
    if (!r.error.empty()) {
        fmt::print(stderr, "{}: {}\n", me, r.error);
        keep_report(a.out, r.files);
        return 2;
    }
    if (r.stopped_in) print_interrupted(*r.stopped_in, r.rows.size(), r.sizes);
    print_report(a.out, r.files);
    if (r.stopped_in) return StopOnSignal::exit_status();
    for (const live::LiveRow& row : r.rows)
        if (!row.complete || row.mismatched || row.lossless_drops) return 1;
    return 0;
}

std::string join_sizes(const std::vector<std::string>& sizes) {
    std::string s;
    for (const std::string& v : sizes) s += (s.empty() ? "" : ",") + v;
    return s;
}

// `--processes`: one `rocemu fabric node` per switch and one for the NICs.
int launch_split(const Topology& t, Pattern p, const FabricArgs& a, const LiveCliArgs& l) {
    const char* me = "rocemu fabric run --live --processes";
    std::vector<std::string> nodes;
    try {
        nodes = live::node_names(t);
    } catch (const std::invalid_argument& e) {
        fmt::print(stderr, "{}: {}\n", me, e.what());
        return 2;
    }
    for (const std::string& n : nodes)
        if (live::ethdevs_needed(t, n) > live::max_ethdevs_per_process()) {
            fmt::print(stderr, "{}: node {} of fabric '{}' needs {} DPDK ports and a process has at most {} "
                               "(RTE_MAX_ETHPORTS)\n", me, n, t.cfg.name, live::ethdevs_needed(t, n),
                       live::max_ethdevs_per_process());
            return 2;
        }
    const double scale = l.scale > 0 ? l.scale : live::default_scale(t);
    std::string dir = l.link_dir;
    const bool own_dir = dir.empty();
    if (own_dir) {
        char tmpl[] = "/tmp/rocemu-fabric-XXXXXX";
        if (!mkdtemp(tmpl)) {
            fmt::print(stderr, "{}: cannot make a folder in /tmp: {}\n", me, std::strerror(errno));
            return 2;
        }
        dir = tmpl;
    } else {
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) {
            fmt::print(stderr, "{}: --link-dir {}: {}\n", me, dir, ec.message());
            return 2;
        }
    }
    std::error_code ec;
    // A reused folder's clock file: its slots would be dropped as gone
    // anyway, but a new run starts from a clean one.
    std::filesystem::remove(live::clock_path(dir), ec);
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) {
        fmt::print(stderr, "{}: cannot find its own binary: {}\n", me, ec.message());
        return 2;
    }
    std::vector<std::string> common{self, "fabric", "node"};
    if (a.use_default || a.config.empty()) common.push_back("--default");
    else common.insert(common.end(), {"-c", std::filesystem::absolute(a.config).string()});
    common.insert(common.end(), {"--link-dir", dir, "--scale", fmt::format("{}", scale), "--seed",
                                 std::to_string(a.seed)});
    if (l.busy_poll) common.push_back("--busy-poll");
    if (l.clock == "own") common.insert(common.end(), {"--clock", "own"});
    if (!a.nic_model.empty()) common.insert(common.end(), {"--nic-model", a.nic_model});
    if (!a.pcap.empty()) common.insert(common.end(), {"--pcap", a.pcap});
    std::vector<live::NodeCommand> cmds;
    for (const std::string& n : nodes) {
        live::NodeCommand c{n, common, ""};
        if (n == live::kHostsNode) {
            c.argv.insert(c.argv.end(), {"--hosts", "-w", a.workload, "--sizes", join_sizes(a.sizes), "--qps",
                                         std::to_string(l.qps), "--timeout", fmt::format("{}", l.timeout_s), "-o",
                                         a.out});
            if (l.rc_timeout) c.argv.insert(c.argv.end(), {"--rc-timeout", std::to_string(l.rc_timeout)});
        } else {
            c.argv.insert(c.argv.end(), {"--switch", n});
            c.log = (std::filesystem::path(dir) / (n + ".log")).string();
        }
        const std::vector<std::string> eal = live::node_eal_args(l.eal_args, n);
        if (!eal.empty()) {
            c.argv.push_back("--");
            c.argv.insert(c.argv.end(), eal.begin(), eal.end());
        }
        c.own_eal_prefix = dpdk::make_eal_args(eal, 1).file_prefix == "rocemu-1";
        cmds.push_back(std::move(c));
    }
    fmt::print("{}\nsplit: {} processes (hosts + {} switches) over memif, scale 1:{:g}, folder {}\n", t.summary(),
               cmds.size(), cmds.size() - 1, scale, dir);
    std::fflush(stdout);
    // Startup and every size's timeout, with a minute for the nodes to meet.
    const live::LaunchResult r =
        live::launch_nodes(cmds, 60 + l.timeout_s * static_cast<double>(std::max<size_t>(1, a.sizes.size())));
    for (const live::NodeCommand& c : cmds) {
        if (c.log.empty()) continue;
        std::ifstream f(c.log);
        for (std::string line; std::getline(f, line);)
            if (line.rfind("switch ", 0) == 0) fmt::print("  {}\n", line);
    }
    for (const std::string& n : r.killed_after_grace)
        fmt::print(stderr, "{}: node {} did not stop within {:g} s of SIGTERM: ended with SIGKILL\n", me, n,
                   live::kNodeStopGrace.seconds());
    if (!r.error.empty()) {
        fmt::print(stderr, "{}: {}\n  logs and counters kept in {}\n", me, r.error, dir);
        return r.status;
    }
    if (!a.pcap.empty()) {
        // Each node wrote what its ends of the link received; one file, in time order.
        const std::vector<std::string> parts = live::capture_parts(t, dir, a.pcap);
        const std::string out = (std::filesystem::path(a.out) / fmt::format("live_{}_{}.pcap", pattern_name(p), a.pcap)).string();
        std::string why;
        std::vector<pcap::MergeInput> in;
        for (const std::string& part : parts) in.push_back({part, Nanos{0}});  // one machine, one clock
        const std::optional<uint64_t> frames = pcap::merge(in, out, why);
        if (!frames) {
            fmt::print(stderr, "{}: --pcap: {}\n  logs, counters and captures kept in {}\n", me, why, dir);
            return 2;
        }
        fmt::print("pcap: {} frames of link {} in {} (from {} node files)\n", *frames, a.pcap, out, parts.size());
        if (!record_report(a.out, {out}, why)) fmt::print(stderr, "{}: report folder {}: {}\n", me, a.out, why);
    }
    if (own_dir && r.status == 0) std::filesystem::remove_all(dir, ec);
    return r.status;
}

int run_live_cli(const FabricConfig& cfg, Pattern p, const std::vector<Bytes>& sizes, const FabricArgs& a,
                 const LiveCliArgs& l) {
    const std::optional<Topology> t = live_topology(cfg, a, l, "rocemu fabric run --live");
    if (!t || !workload_fits(*t, p, sizes, "rocemu fabric run --live")) return 2;
    if (l.processes) return launch_split(*t, p, a, l);
    fmt::print("{}\n", t->summary());
    live::LiveResult r;
    const StopOnSignal stop;
    live::LiveOptions o = live_options(a, l);
    o.stop = &StopOnSignal::requested;
    try {
        r = live::run_live_sweep(*t, p, sizes, o);
    } catch (const std::exception& e) {
        r.error = e.what();
    }
    return report_live(p, r, a, "rocemu fabric run --live");
}

// `fabric node --hosts`: the NICs, the workload and the report.
int run_hosts_node_cli(const FabricConfig& cfg, Pattern p, const std::vector<Bytes>& sizes, const FabricArgs& a,
                       const LiveCliArgs& l, const live::NodeOptions& n) {
    const std::optional<Topology> t = live_topology(cfg, a, l, "rocemu fabric node");
    if (!t || !workload_fits(*t, p, sizes, "rocemu fabric node")) return 2;
    live::LiveResult r;
    const StopOnSignal stop;
    live::LiveOptions o = live_options(a, l);
    o.stop = &StopOnSignal::requested;
    try {
        r = live::run_hosts_node(*t, p, sizes, o, n);
    } catch (const std::exception& e) {
        r.error = e.what();
    }
    if (r.error.empty() && r.fabric_up) return report_live(p, r, a, "rocemu fabric node --hosts");
    // Its memif ports may be left open (LiveFabric::build says why; also when
    // stopped while the fabric came up): the EAL's cleanup closes started
    // ports and would crash as a close would. Like a switch node, leave
    // without it; the socket files are already removed.
    const int status = report_live(p, r, a, "rocemu fabric node --hosts", false);
    std::fflush(nullptr);
    dpdk::Eal::remove_own_runtime_dir();
    std::_Exit(status);
}
#endif

}  // namespace

int run_scenario_cli(const std::string& name, const ScenarioOptions& o, const char* me) {
    std::vector<std::string> names;
    for (auto n : scenario_names())
        if (name == "all" || name == n) names.emplace_back(n);
    if (names.empty()) {
        std::string known;
        for (auto n : scenario_names()) known += fmt::format("{}, ", n);
        fmt::print(stderr, "{}: unknown scenario '{}' (known: {}all)\n", me, name, known);
        return 2;
    }
    bool all_pass = true;
    std::vector<std::string> files;
    const StopOnSignal stop;
    for (const std::string& n : names) {
        fmt::print("== scenario {}: {}\n", n, scenario_description(n));
        if (o.fabric && !scenario_takes_fabric(n))
            fmt::print("note: {} keeps its own fabric; the one given ({}) is for ecmp, incast and dcqcn\n", n,
                       o.fabric->name);
        ScenarioResult r;
        try {
            ScenarioOptions with_progress = o;
            with_progress.progress = progress_line;
            with_progress.stop = &StopOnSignal::requested;
            r = run_scenario(n, with_progress);
        } catch (const Interrupted& e) {
            clear_progress();
            std::fflush(stdout);
            fmt::print(stderr, "{}: interrupted by {}: {}; no verdict\n", me, StopOnSignal::name(), e.what());
            print_report(o.out_dir, files);
            return StopOnSignal::exit_status();
        } catch (const std::exception& e) {
            clear_progress();
            fmt::print(stderr, "{}: {}\n", me, e.what());
            keep_report(o.out_dir, files);
            return 2;
        }
        clear_progress();
        fmt::print("expect: {}\n\n{}\n", r.expectation, format_table(r.table));
        for (const std::string& l : r.log) fmt::print("  {}\n", l);
        fmt::print("verdict: {}  {}\n\n", r.pass ? "PASS" : "FAIL", r.verdict);
        all_pass &= r.pass;
        files.insert(files.end(), r.files.begin(), r.files.end());
    }
    print_report(o.out_dir, files);
    return all_pass ? 0 : 1;
}

void add_scenario_subcommand(CLI::App& app, int& status);

#ifdef ROCEMU_WITH_DPDK
// `fabric node`: one process of a split live fabric, as `run --live
// --processes` starts it, or by hand on each machine of a fabric spread over
// real NICs (--port CABLE=DEVSPEC).
void add_node_subcommand(CLI::App& fab, int& status) {
    auto a = std::make_shared<FabricArgs>();
    auto l = std::make_shared<LiveCliArgs>();
    auto n = std::make_shared<live::NodeOptions>();
    auto sw = std::make_shared<std::string>();
    auto hosts = std::make_shared<bool>(false);
    CLI::App* node = fab.add_subcommand("node", "One process of a live fabric split over processes (see run --processes)");
    node->add_option("--switch", *sw, "run this switch of the fabric");
    node->add_flag("--hosts", *hosts, "run every NIC, the workload and the report");
    node->add_option("--link-dir", n->link_dir,
                     "folder of the memif sockets, ready marks, counter snapshots and the fabric clock the nodes of "
                     "one machine share")
        ->required();
    node->add_option("--scale", l->scale, "the same in every node; default: the host links' sum over 4 Gbit/s");
    node->add_option("--port", n->ports,
                     "CABLE=DEVSPEC: this node's end of CABLE on that DPDK device instead of memif (repeatable): "
                     "net_af_packet0,iface=eth1,... or a NIC's PCI address, which also needs `-- -a ADDR` (and under "
                     "uio hugepages: --huge-dir DIR)")
        ->allow_extra_args(false);
    node->add_flag("--busy-poll", n->busy_poll, "never sleep (default: 20 us after 64 idle turns)");
    node->add_option("--clock", l->clock,
                     "shared: the fabric clock of the nodes of this machine that share LINK-DIR (none runs more than "
                     "two steps ahead of the slowest); fabric: that, and across machines over the control addresses "
                     "(UDP; give it to every node); own: a clock of this node's own")
        ->check(CLI::IsMember({"shared", "own", "fabric"}))
        ->capture_default_str();
    node->add_option("--machine", n->machines,
                     "MACHINE=NODE,NODE,...: where every node runs (repeatable; as fabric plan prints it): a cable to "
                     "another machine needs a --port, a switch there a --control")
        ->allow_extra_args(false);
    node->add_option("--control-listen", n->control_listen,
                     "--switch: serve the ready state and counters on ADDR:PORT (TCP), for a hosts node elsewhere");
    node->add_option("--control", n->controls,
                     "--hosts: SWITCH=HOST:PORT: read that switch node's state from its --control-listen instead of "
                     "the link folder (repeatable)")
        ->allow_extra_args(false);
    node->add_option("--pcap", a->pcap,
                     "write what this node's ends of that link receive to LINK-DIR/LINK@NODE.pcap (run --processes "
                     "merges them)")
        ->check(kNonEmpty);
    node->add_option("--nic-model", a->nic_model, "override the file's nic.model (a live node runs rc only)")
        ->check(CLI::IsMember({"rc", "generator"}));
    node->add_option("--wait", l->wait_s, "--hosts: seconds to wait for the NICs' links and the switch nodes")
        ->capture_default_str();
    add_sweep_options(node, *a, "--hosts: ");
    node->add_option("--qps", l->qps, "--hosts: RC QPs per flow, 1-64")->capture_default_str();
    node->add_option("--timeout", l->timeout_s, "--hosts: live seconds per size before giving up")->capture_default_str();
    node->add_option("--rc-timeout", l->rc_timeout, "--hosts: the QPs' ACK timeout exponent, 1-31 (default: from the bound)")
        ->check(CLI::Range(1, 31));
    node->add_option("eal", l->eal_args, "EAL arguments, after --");
    node->callback([a, l, n, sw, hosts, node, &status] {
        if (sw->empty() == !*hosts) {
            fmt::print(stderr, "rocemu fabric node: give exactly one of --switch NAME and --hosts\n");
            status = 2;
            return;
        }
        // An option of the other kind of node would be ignored: refused.
        for (const char* o :
             {"--control", "--wait", "--qps", "--timeout", "--rc-timeout", "-w", "--sizes", "-b", "-e", "-i", "-f", "-o"})
            if (!*hosts && node->count(o) > 0) {
                fmt::print(stderr, "rocemu fabric node: {} is for the hosts node (--hosts)\n", o);
                status = 2;
                return;
            }
        if (!resolve_sweep(*a, "rocemu fabric node")) {
            status = 2;
            return;
        }
        if (*hosts && node->count("--control-listen") > 0) {
            fmt::print(stderr, "rocemu fabric node: --control-listen is for a switch node (--switch NAME)\n");
            status = 2;
            return;
        }
        const auto cfg = load(*a);
        if (!cfg) {
            status = 2;
            return;
        }
        if (l->wait_s <= 0) {
            fmt::print(stderr, "rocemu fabric node: --wait {} must be positive\n", l->wait_s);
            status = 2;
            return;
        }
        n->wait = Nanos{static_cast<int64_t>(l->wait_s * 1e9)};
        n->scale = l->scale;
        n->seed = a->seed;
        n->eal_args = l->eal_args;
        n->pcap_link = a->pcap;
        n->own_clock = l->clock == "own";
        n->fabric_clock = l->clock == "fabric";
        if (!sw->empty()) {
            const std::optional<Topology> t = live_topology(*cfg, *a, *l, "rocemu fabric node");
            status = t ? live::run_switch_node(*t, *sw, *n) : 2;
            return;
        }
        const auto p = workload_of(*a, "rocemu fabric node");
        const auto sizes = sizes_of(*a, "rocemu fabric node");
        status = p && sizes ? run_hosts_node_cli(*cfg, *p, *sizes, *a, *l, *n) : 2;
    });
}

// An argument as a shell reads it back: quoted unless plainly safe.
std::string shell_word(const std::string& w) {
    if (!w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,@+-") ==
                          std::string::npos)
        return w;
    std::string q = "'";
    for (const char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

struct PlanArgs {
    std::vector<std::string> machines;
    std::vector<std::string> addresses;  // MACHINE=HOST
    uint16_t control_port = 7700;
    std::string link_dir;
    std::string binary = "rocemu";
    std::vector<std::string> devices;  // CABLE@MACHINE=IFACE|PCI
};

// `fabric plan`: the `fabric node` command each machine runs. Every cable
// between two machines gets a port at both ends: the device --device gives
// that end (an interface's af_packet port, or a PCI NIC, which also needs the
// EAL's -a), else an af_packet port whose interface is left as a placeholder
// <iface:CABLE@MACHINE> for the user to fill in.
int plan_cli(const Topology& t, const FabricArgs& a, const LiveCliArgs& l, const PlanArgs& pa) {
    const char* me = "rocemu fabric plan";
    std::map<std::string, std::string> on;
    std::map<std::string, std::string> address;
    std::map<std::pair<std::string, std::string>, live::PlanDevice> device;
    try {
        on = live::parse_machines(t, pa.machines);
        if (!on.empty()) device = live::parse_plan_devices(t, on, pa.devices);
        for (const std::string& v : pa.addresses) {
            const auto kv = live::split_assignment(v);
            if (!kv) throw std::invalid_argument(fmt::format("--address '{}': expected MACHINE=HOST", v));
            if (std::none_of(on.begin(), on.end(), [&](const auto& n) { return n.second == kv->first; }))
                throw std::invalid_argument(fmt::format("--address '{}': no --machine is named {}", v, kv->first));
            if (!address.emplace(kv->first, kv->second).second)
                throw std::invalid_argument(
                    fmt::format("--address '{}': machine {} already has address {}", v, kv->first, address[kv->first]));
        }
        if (pa.control_port == 0 || pa.control_port + t.switches.size() - 1 > 65535)
            throw std::invalid_argument(fmt::format("--control-port {}: the {} switches take ports {} to {}, which must "
                                                    "lie in 1-65535",
                                                    pa.control_port, t.switches.size(), pa.control_port,
                                                    pa.control_port + t.switches.size() - 1));
    } catch (const std::invalid_argument& e) {
        fmt::print(stderr, "{}: {}\n", me, e.what());
        return 2;
    }
    if (on.empty()) {
        fmt::print(stderr, "{}: give every node a machine with --machine MACHINE=NODE,..., e.g. --machine a=hosts "
                           "--machine b={}\n", me, t.switches.front().name);
        return 2;
    }
    const double scale = l.scale > 0 ? l.scale : live::default_scale(t);
    const std::string base = pa.link_dir.empty() ? "/tmp/rocemu-fabric-" + t.cfg.name : pa.link_dir;
    const auto address_of = [&](const std::string& m) {
        const auto it = address.find(m);
        return it == address.end() ? "<address:" + m + ">" : it->second;
    };
    std::vector<std::string> common{pa.binary, "fabric", "node"};
    if (a.use_default || a.config.empty()) common.push_back("--default");
    else common.insert(common.end(), {"-c", std::filesystem::absolute(a.config).string()});
    common.insert(common.end(), {"--scale", fmt::format("{}", scale), "--seed", std::to_string(a.seed)});
    for (const std::string& m : pa.machines) common.insert(common.end(), {"--machine", m});
    if (l.clock != "shared") common.insert(common.end(), {"--clock", l.clock});
    // Each switch's control port: the base plus its index, so that switches on one machine differ.
    std::map<std::string, uint16_t> port_of;
    for (uint32_t s = 0; s < t.switches.size(); ++s)
        port_of[t.switches[s].name] = static_cast<uint16_t>(pa.control_port + s);

    std::vector<std::string> crossing;
    for (const LinkSpec& link : t.links) {
        const std::string na = live::node_of(t, link.a), nb = live::node_of(t, link.b);
        if (on[na] != on[nb])
            crossing.push_back(fmt::format("{} ({} on {}, {} on {})", link.name, na, on[na], nb, on[nb]));
    }
    fmt::print("# fabric {}: {} nodes on {} machines, scale 1:{:g}, seed {}\n", t.cfg.name, on.size(),
               pa.machines.size(), scale, a.seed);
    const bool placeholders = device.size() < 2 * crossing.size();
    fmt::print("# {} cables join two machines, each end on the interface (MTU >= {}, as an af_packet port) or PCI NIC "
               "that reaches the other end{}{}\n",
               crossing.size(), t.cfg.nic.mtu,
               placeholders ? ": replace each <iface:CABLE@MACHINE> (or give plan --device CABLE@MACHINE=IFACE|PCI)"
                            : "",
               crossing.empty() ? "" : ":");
    for (const std::string& c : crossing) fmt::print("#   {}\n", c);
    if (std::any_of(device.begin(), device.end(), [](const auto& d) { return !d.second.pci.empty(); }))
        fmt::print("# A PCI NIC must be bound to vfio-pci or uio_pci_generic (an mlx5 NIC stays on mlx5_core); under "
                   "uio, or vfio without an IOMMU, DPDK needs hugepages: add --huge-dir DIR (a hugetlbfs mount) after "
                   "its -a.\n");
    if (l.clock == "fabric")
        fmt::print("# --clock fabric: the hosts node and each switch node on another machine exchange the fabric clock "
                   "over UDP on that switch's control port: let UDP through wherever TCP to it goes.\n");
    fmt::print("# Start the switch nodes (any order), then the hosts node; once it has printed its table, stop the "
               "switch nodes with Ctrl-C.\n");
    std::map<std::string, std::vector<std::string>> by_machine;
    for (const std::string& n : live::node_names(t)) by_machine[on[n]].push_back(n);
    for (const bool hosts_pass : {false, true})
        for (const auto& [m, nodes] : by_machine)
            for (const std::string& n : nodes) {
                if ((n == live::kHostsNode) != hosts_pass) continue;
                std::vector<std::string> argv = common;
                argv.insert(argv.end(), {"--link-dir", base + "/" + m});
                if (n == live::kHostsNode) {
                    argv.push_back("--hosts");
                    for (const SwitchSpec& s : t.switches)
                        if (on[s.name] != m)
                            argv.insert(argv.end(), {"--control", fmt::format("{}={}:{}", s.name, address_of(on[s.name]),
                                                                             port_of[s.name])});
                } else {
                    argv.insert(argv.end(), {"--switch", n});
                    if (on[live::kHostsNode.data()] != m)
                        argv.insert(argv.end(), {"--control-listen", fmt::format("0.0.0.0:{}", port_of[n])});
                }
                uint32_t vdev = 0;
                std::vector<std::string> eal;
                for (const live::CableEnd& e : live::cable_ends(t, n, "")) {
                    if (on[e.peer_node] == m) continue;
                    const std::string& cable = t.links[e.link].name;
                    const auto d = device.find({cable, m});
                    if (d != device.end() && !d->second.pci.empty()) {
                        argv.insert(argv.end(), {"--port", fmt::format("{}={}", cable, d->second.pci)});
                        eal.insert(eal.end(), {"-a", d->second.pci});
                        continue;
                    }
                    const std::string iface =
                        d != device.end() ? d->second.iface : fmt::format("<iface:{}@{}>", cable, m);
                    argv.insert(argv.end(), {"--port", fmt::format("{}=net_af_packet{},iface={},framesz=9216,"
                                                                   "blocksz=36864", cable, vdev++, iface)});
                }
                if (n == live::kHostsNode)
                    argv.insert(argv.end(), {"-w", a.workload, "--sizes", join_sizes(a.sizes), "--qps",
                                             std::to_string(l.qps), "--timeout", fmt::format("{}", l.timeout_s), "-o",
                                             a.out});
                if (!eal.empty()) {
                    argv.push_back("--");
                    argv.insert(argv.end(), eal.begin(), eal.end());
                }
                std::string line;
                for (const std::string& w : argv) line += (line.empty() ? "" : " ") + shell_word(w);
                fmt::print("# machine {}, node {}\n{}\n", m, n, line);
            }
    return 0;
}

void add_plan_subcommand(CLI::App& fab, int& status) {
    auto a = std::make_shared<FabricArgs>();
    auto l = std::make_shared<LiveCliArgs>();
    auto pa = std::make_shared<PlanArgs>();
    CLI::App* plan = fab.add_subcommand(
        "plan", "Print the `fabric node` command each machine runs for a live fabric split across machines");
    add_sweep_options(plan, *a, "the hosts node's ");
    plan->add_option("--machine", pa->machines, "MACHINE=NODE,NODE,...: the nodes (hosts, switch names) on a machine")
        ->allow_extra_args(false)
        ->required();
    plan->add_option("--address", pa->addresses, "MACHINE=HOST: how the hosts node reaches that machine's switches")
        ->allow_extra_args(false);
    plan->add_option("--control-port", pa->control_port, "first switch's control port (the next ones count up)")
        ->capture_default_str();
    plan->add_option("--link-dir", pa->link_dir, "each machine's link folder is this plus /MACHINE "
                                                 "(default /tmp/rocemu-fabric-NAME)");
    plan->add_option("--binary", pa->binary, "the rocemu binary as the machines call it")->capture_default_str();
    plan->add_option("--device", pa->devices,
                     "CABLE@MACHINE=DEV: MACHINE's end of CABLE (a cable between two machines) on interface DEV (an "
                     "af_packet port) or on the PCI NIC DEV (e.g. 0000:3b:00.0; the node gets -a DEV) instead of a "
                     "placeholder (repeatable)")
        ->allow_extra_args(false);
    plan->add_option("--scale", l->scale, "default: the host links' sum over 4 Gbit/s");
    plan->add_option("--qps", l->qps, "the hosts node's RC QPs per flow")->capture_default_str();
    plan->add_option("--timeout", l->timeout_s, "the hosts node's live seconds per size")->capture_default_str();
    // Across machines by default: each machine on a clock of its own reads
    // its rates off by up to half (fabric/README.md, One clock across machines).
    l->clock = "fabric";
    plan->add_option("--clock", l->clock,
                     "fabric: all nodes share one fabric clock, across machines too (the hosts node and each switch "
                     "elsewhere exchange their machine's time over UDP on its control address); shared: each "
                     "machine's nodes a clock of their own; own: each node its own")
        ->check(CLI::IsMember({"shared", "own", "fabric"}))
        ->capture_default_str();
    plan->callback([a, l, pa, &status] {
        if (!resolve_sweep(*a, "rocemu fabric plan")) {
            status = 2;
            return;
        }
        const auto cfg = load(*a);
        const std::optional<Topology> t = cfg ? live_topology(*cfg, *a, *l, "rocemu fabric plan") : std::nullopt;
        // What the hosts node would refuse is refused here, before anything
        // is started on any machine.
        const auto p = t ? workload_of(*a, "rocemu fabric plan") : std::nullopt;
        const auto sizes = p ? sizes_of(*a, "rocemu fabric plan") : std::nullopt;
        if (!sizes || !workload_fits(*t, *p, *sizes, "rocemu fabric plan")) {
            status = 2;
            return;
        }
        try {
            status = plan_cli(*t, *a, *l, *pa);
        } catch (const std::invalid_argument& e) {
            fmt::print(stderr, "rocemu fabric plan: {}\n", e.what());
            status = 2;
        }
    });
}
#endif

// Registers both `fabric` and `scenario`.
void add_fabric_command(CLI::App& app, int& status) {
    add_scenario_subcommand(app, status);
    auto a = std::make_shared<FabricArgs>();
    CLI::App* fab = app.add_subcommand("fabric", "Whole fabrics in virtual time");
    fab->require_subcommand(1);

    CLI::App* show = fab->add_subcommand("show", "Parse a fabric file and print what it expands to");
    show->add_option("-c,--config", a->config, "fabric YAML (configs/fabrics/)")->check(kNonEmpty);
    show->add_flag("--default", a->use_default, "the embedded default fabric");
    show->callback([a, &status] {
        const auto cfg = load(*a);
        if (!cfg) {
            status = 2;
            return;
        }
        const Topology t = generate(*cfg);
        fmt::print("{}\n", t.summary());
        for (const NicSpec& n : t.nics)
            fmt::print("  {:<8} {:<15} on {}:{}\n", n.name, format_ipv4(n.ip), t.switches[n.sw].name,
                       t.switches[n.sw].cfg.ports[n.sw_port].name);
        fmt::print("links:");
        for (const LinkSpec& l : t.links) fmt::print(" {}", l.name);
        fmt::print("\n");
    });

    CLI::App* run = fab->add_subcommand("run", "Run a workload size sweep (nccl-tests columns) or a scenario");
    add_sweep_options(run, *a, "");
    run->add_option("--scenario", a->scenario, "run this scenario on the fabric instead of a sweep");
    run->add_option("--pcap", a->pcap,
                    "capture this link (e.g. leaf0-spine1) into the report folder (--live: live_<workload>_<link>.pcap, "
                    "frames as its ends receive them, real time stamps)")
        ->check(kNonEmpty);
    run->add_option("--nic-model", a->nic_model, "override the file's nic.model: rc or generator")
        ->check(CLI::IsMember({"rc", "generator"}));
    auto live = std::make_shared<LiveCliArgs>();
    add_live_options(run, *live);
    run->callback([a, live, run, &status] {
        if (const std::string e = misplaced_live_option(*run, *live); !e.empty()) {
            fmt::print(stderr, "rocemu fabric run: {}\n", e);
            status = 2;
            return;
        }
        if (!resolve_sweep(*a, "rocemu fabric run")) {
            status = 2;
            return;
        }
        auto cfg = load(*a);
        if (!cfg) {
            status = 2;
            return;
        }
        ScenarioOptions o;
        o.seed = a->seed;
        o.out_dir = a->out;
        o.pcap_link = a->pcap;
        o.fabric = *cfg;
        if (!a->scenario.empty()) {
            for (const char* opt : {"-w", "--sizes", "-b", "-e", "-i", "-f"})
                if (run->count(opt) > 0) {
                    fmt::print(stderr, "rocemu fabric run: --scenario runs the scenario's own workloads; {} is for a "
                                       "sweep (without --scenario)\n", opt);
                    status = 2;
                    return;
                }
        }
        if (!a->scenario.empty() && !live->enabled) {
            status = run_scenario_cli(a->scenario, o, "rocemu fabric run --scenario");
            return;
        }
        const auto p = workload_of(*a, "rocemu fabric run");
        const auto sizes = sizes_of(*a, "rocemu fabric run");
        if (!p || !sizes) {
            status = 2;
            return;
        }
        if (live->enabled) {
#ifdef ROCEMU_WITH_DPDK
            status = run_live_cli(*cfg, *p, *sizes, *a, *live);
#else
            fmt::print(stderr, "rocemu fabric run --live: this rocemu was built without DPDK (-DROCEMU_DPDK=OFF)\n");
            status = 2;
#endif
            return;
        }
        o.progress = progress_line;
        const Topology t = generate(*cfg);
        if (!workload_fits(t, *p, *sizes, "rocemu fabric run")) {
            status = 2;
            return;
        }
        if (const std::string e = t.pcap_link_error(a->pcap); !e.empty()) {
            fmt::print(stderr, "rocemu fabric run: {}\n", e);
            status = 2;
            return;
        }
        fmt::print("{}\n", t.summary());
        std::fflush(stdout);  // before the progress lines, also when stdout is a pipe or a CI log
        std::vector<SweepRow> rows;
        std::vector<std::string> files;
        const StopOnSignal stop;
        o.stop = &StopOnSignal::requested;
        try {
            rows = run_sweep(t, *p, *sizes, o, &files);
        } catch (const std::exception& e) {
            clear_progress();
            fmt::print(stderr, "rocemu fabric run: {}\n", e.what());
            keep_report(o.out_dir, files);
            status = 2;
            return;
        }
        clear_progress();
        fmt::print("{}", format_sweep(*p, rows));
        status = 0;
        if (rows.size() < sizes->size()) {
            print_interrupted((*sizes)[rows.size()], rows.size(), sizes->size());
            status = StopOnSignal::exit_status();
        }
        print_report(o.out_dir, files);
    });
#ifdef ROCEMU_WITH_DPDK
    add_node_subcommand(*fab, status);
    add_plan_subcommand(*fab, status);
#endif
}

void add_scenario_subcommand(CLI::App& app, int& status) {
    auto name = std::make_shared<std::string>();
    auto o = std::make_shared<ScenarioOptions>();
    o->out_dir = "rocemu-report";
    auto config = std::make_shared<std::string>();
    std::string list;
    for (auto n : scenario_names()) list += fmt::format("\n  {:<10} {}", n, scenario_description(n));
    CLI::App* cmd = app.add_subcommand("scenario", "Run a playbook scenario and print its verdict:" + list + "\n  all");
    cmd->add_option("name", *name, "scenario name, or all")->required();
    cmd->add_option("--seed", o->seed, "run seed")->check(kWholeNumber)->capture_default_str();
    cmd->add_option("-o,--out", o->out_dir, "report folder")->check(kNonEmpty)->capture_default_str();
    cmd->add_option("--pcap", o->pcap_link, "capture this link of every variant into the report folder")
        ->check(kNonEmpty);
    cmd->add_flag("--reduced", o->reduced, "the CI size: fewer hosts, smaller messages");
    cmd->add_option("-c,--config", *config, "fabric YAML to use where the scenario takes one (ecmp, incast, dcqcn)")
        ->check(kNonEmpty);
    cmd->callback([name, o, config, &status] {
        if (!config->empty()) {
            const ConfigResult r = load_fabric_config(*config);
            if (!r.config) {
                fmt::print(stderr, "rocemu: {}\n", r.error);
                status = 2;
                return;
            }
            o->fabric = r.config;
        }
        status = run_scenario_cli(*name, *o, "rocemu scenario");
    });
}

}  // namespace rocemu::cli
