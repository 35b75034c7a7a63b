// Simulation speed of whole fabrics in virtual time, on one core:
//  1. one simulated second of a 2:1 incast at 40 Gbit/s (DCQCN on), the
//     figure ns3-rdma quotes minutes for; target <= 10 s of wall time;
//  2. the cost per simulated packet on 16-, 64- and 256-host leaf-spines
//     running a permutation, which should stay flat within 30%, on the RC NIC
//     model and on the generator, each with its ratio to 16 hosts.
// A simulated packet is a frame delivered over one link (one hop).
//
// The sizes compare like with like: every size is built from the same
// leaves (8 hosts at 100 Gbit/s and 8 spine uplinks at 200 Gbit/s each, so
// that no size congests the core; LeafSpec), so only the number of leaves (2,
// 8, 32) and the spines' port count grow; every
// host starts one flow; and every size runs the same warm-up and the same
// timed span of virtual time. Two sets of flows (--flows):
//  - random: a random permutation (Pattern::Permutation), as a user's run
//    would have it. Its traffic is not the same at every size: at 16 hosts
//    7 of a host's 15 peers share its leaf (two-hop paths), at 256 hosts 7
//    of 255, and more flows meet on the spines as the fabric grows;
//  - shift: host i sends to host i + 8, on the next leaf, so every flow
//    crosses the spines on a four-hop path and every size carries the same
//    traffic per host (packet-hops and frames in flight per host equal):
//    only the fabric's size differs, which is what the scaling target asks.
// The switches route RoCE per packet, so the RC NICs spray and reorder
// (permutation_topology); for RC the bench prints each size's goodput and
// how much of it arrived out of sequence, to show the sizes' traffic alike
// (shift: 97.9 Gbit/s a host and nothing out of sequence at every size).
//
// Usage: rocemu_fabric_bench [INCAST_SECONDS] [--model rc|generator|both]
//            [--hosts 16|32|64|128|256|all|sweep] [--flows random|shift|both] [--repeat N] [--span-us N]
//            [--mtu 1500|4200|9000] [--uplink-gbps 100|200|400] [--no-incast] [--scatter-heap] [--page-census NS]
// --scatter-heap first leaves the heap as a long process's is (400000 blocks
// of 16 to 6015 bytes allocated, two in three freed, the rest kept), so the
// fabrics are built in its holes, as a sweep's later sizes are.
// --page-census NS runs no timing: after each permutation's warm-up it
// counts the distinct pages 50 windows of NS ns of virtual time touch, by
// mapping and by the code that touched each first (page_census.hpp;
// page_census.sh names that code's source files).
// --repeat runs the sizes N times interleaved (default 3) and keeps the
// cheapest of each, since other load on the machine only adds time. `all` is
// 16, 64 and 256 hosts; `sweep` every size from 16 to 256, doubling, to see
// where the cost per packet-hop starts to grow.
//
// The scaling figure depends on the core's caches (the 256-host fabric's hot
// state is about 1 MiB), so the bench first prints them (sysfs) and the
// latency of a dependent load over working sets from 64 KiB to 16 MiB, the
// baseline the per-hop costs are read against.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>

#include <fmt/format.h>

#include "common/malloc_thp.hpp"
#include "fabric/bench/page_census.hpp"
#include "fabric/fabric.hpp"
#include "fabric/workload.hpp"

namespace {

using namespace rocemu;
using namespace rocemu::fabric;

Topology make(const std::string& yaml) {
    const ConfigResult r = parse_fabric_config(yaml, "bench.yaml");
    if (!r.config) {
        fmt::print(stderr, "{}\n", r.error);
        std::exit(2);
    }
    // A fabric rocemu warns about (fabric run prints the same) runs below
    // what its links carry, and would be timed doing something else.
    const std::vector<std::string> warnings = config_warnings(*r.config);
    for (const std::string& w : warnings) fmt::print(stderr, "bench.yaml: {}\n", w);
    if (!warnings.empty()) std::exit(2);
    return generate(*r.config);
}

struct Figures {
    double wall_s = 0;
    double cpu_s = 0;  // on a shared machine the fairer figure
    uint64_t packets = 0;
    uint64_t events = 0;
    uint64_t by_kind[sim::kEventKinds] = {};  // events by sim::EventKind
    uint64_t page_faults = 0;   // minor faults in the timed span
    uint32_t frames = 0;        // frame buffers the pool holds at the end
    uint32_t compact = 0;       // of them compact (sim/README.md, "Compact frames")
    uint32_t in_use = 0;        // frames in flight at the end
    std::size_t heap = 0;       // bytes of the fabric's heap segment
    // RC only, in the timed span, summed over the engines: what the
    // transport did with the fabric's order of arrival.
    uint64_t rcvd_bytes = 0;   // payload executed in order, once
    uint64_t rcvd_pkts = 0;    // requests and responses received
    uint64_t out_of_seq = 0;   // requests past the expected PSN
    uint64_t placed = 0;       // of them placed directly (spraying)
    uint64_t selective = 0;    // PSNs resent alone, for a selective NAK (spraying)
    uint64_t go_back_n = 0;    // requesters gone back N (a NAK or a timeout)
};

// The engines' counters summed (RC NICs; zero for the generator).
transport::Counters rc_counters(const Fabric& f) {
    transport::Counters sum;
    for (const auto& n : f.rc_nics()) sum.add(n->engine().counters());
    return sum;
}

uint64_t minor_faults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<uint64_t>(u.ru_minflt);
}

double cpu_now() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// Runs `warmup` of virtual time untimed, then `span` timed.
Figures timed_run(Fabric& f, Nanos warmup, Nanos span) {
    f.start();
    if (warmup > Nanos{0}) f.run(warmup);
    const Totals before = f.totals();
    const sim::SimCounters sim_before = f.sim().counters();
    const transport::Counters rc_before = rc_counters(f);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    const uint64_t pf0 = minor_faults();
    f.run(f.now() + span);
    const uint64_t pf = minor_faults() - pf0;
    const double cpu = cpu_now() - c0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const Totals t = f.totals();
    Figures r{wall, cpu, t.frames_delivered - before.frames_delivered, t.sim_events - before.sim_events, {}, pf,
              f.sim().pool().allocated(), f.sim().pool().compact_allocated(), f.sim().pool().in_use(),
              f.heap_bytes()};
    for (std::size_t k = 0; k < sim::kEventKinds; ++k)
        r.by_kind[k] = f.sim().counters().events_by_kind[k] - sim_before.events_by_kind[k];
    const transport::Counters rc = rc_counters(f);
    r.rcvd_bytes = rc.rcvd_bytes - rc_before.rcvd_bytes;
    r.rcvd_pkts = rc.rcvd_pkts - rc_before.rcvd_pkts;
    r.out_of_seq = rc.out_of_seq_request - rc_before.out_of_seq_request;
    r.placed = rc.direct_placed - rc_before.direct_placed;
    r.selective = rc.selective_retransmits - rc_before.selective_retransmits;
    r.go_back_n = rc.completer_retry_err - rc_before.completer_retry_err;
    return r;
}

// "deliver 1.00, port_timer 0.55, ...": the events a packet-hop by kind, the
// kinds that occurred.
std::string events_by_kind(const Figures& r) {
    std::string out;
    for (std::size_t k = 0; k < sim::kEventKinds; ++k) {
        if (r.by_kind[k] == 0) continue;
        if (!out.empty()) out += ", ";
        out += fmt::format("{} {:.2f}", sim::to_string(static_cast<sim::EventKind>(k)),
                           static_cast<double>(r.by_kind[k]) / static_cast<double>(r.packets));
    }
    return out;
}

constexpr std::string_view kUsage =
    "usage: rocemu_fabric_bench [INCAST_SECONDS] [--model rc|generator|both] "
    "[--hosts 16|32|64|128|256|all|sweep] [--flows random|shift|both] [--repeat N] [--span-us N] "
    "[--mtu 1500|4200|9000] [--uplink-gbps 100|200|400] [--no-incast] [--scatter-heap] [--page-census NS]\n"
    "  the 2:1 incast (INCAST_SECONDS simulated, default 1) on each model, then at each host count a random\n"
    "  permutation and (shift) every host sending to the same host of the next leaf, CPU ns per packet-hop and\n"
    "  each size's ratio to 16 hosts (fabric/README.md, Speed); --page-census NS instead counts the pages\n"
    "  windows of NS simulated ns touch after each permutation's warm-up (fabric/bench/page_census.sh)\n";

void usage_error(std::string_view msg) {
    fmt::print(stderr, "rocemu_fabric_bench: {}\n{}", msg, kUsage);
    std::exit(2);
}

void incast(double seconds, NicModel model) {
    const Topology topo = make(fmt::format(
        "topology: {{kind: leaf_spine, leaves: 1, hosts_per_leaf: 3, spines: 0}}\n"
        "links: {{host: {{speed_gbps: 40, delay_ns: 1000}}}}\n"
        "nic: {{model: {}, cc: connectx-default, mtu: 1500}}\nswitch: {{profile: lossless-100g}}\n",
        nic_model_name(model)));
    Fabric f(topo, 1);
    f.add_flow(FlowSpec{0, 2, Bytes{1ull << 40}, Nanos{0}, 0xC001});
    f.add_flow(FlowSpec{1, 2, Bytes{1ull << 40}, Nanos{0}, 0xC002});
    const Figures r = timed_run(f, Nanos{0}, Nanos::from_s(seconds));
    const Totals t = f.totals();
    fmt::print(
        "[{}] 2:1 incast at 40 Gbit/s, MTU 1500, DCQCN: {:.2f} simulated s in {:.2f} s wall, {:.2f} s CPU "
        "(target <= 10 s per simulated s): {:.2f} M packet-hops per CPU s, {:.2f} M events per CPU s; "
        "{} CNPs, {} PFC frames\n",
        nic_model_name(model), seconds, r.wall_s, r.cpu_s, r.packets / r.cpu_s / 1e6, r.events / r.cpu_s / 1e6,
        t.cnps, t.pfc_frames);
    std::fflush(stdout);
}

constexpr int kHostsPerLeaf = 8;
constexpr int kSpines = 8;

enum class Flows { Random, Shift };

const char* flows_name(Flows f) { return f == Flows::Random ? "random permutation" : "shift to the next leaf"; }

// What the permutations' leaves are built of besides their 8 hosts and 8
// spine uplinks: the MTU and the uplinks' speed (the hosts' links are 100
// Gbit/s).
//
// The uplinks are 200 Gbit/s by default (--uplink-gbps 100: 1:1), so that no
// size congests the fabric's core. In a shift, every host sends at line rate
// and receives another host's data at line rate, and the ACKs ride on top:
// at 1:1 the spines' downlinks then carry more than their speed. With two
// leaves (16 hosts) each such downlink has a single upstream, the other
// leaf, whose adaptive routing sees the queue it builds; with more leaves
// it has two (one leaf's data, another's ACKs), the spines queue, and a
// tenth of the RC packets arrive out of sequence at 64 and 256 hosts and
// none at 16: the sizes did not carry the same traffic, and RC's cost a
// packet-hop grew by that as well (fabric/bench/README.md, round 16).
struct LeafSpec {
    int mtu = 4200;
    int uplink_gbps = 200;
};

// The fabric of `hosts` hosts the permutations run on. Its switches route
// RoCE per packet (the profile's adaptive routing), so RC QPs spray and
// reorder, as ConnectX does under Spectrum-X: without a reorder buffer they
// would take each reordering for a loss and go back N (config_warnings
// refuses that fabric). The generator does not care about order and keeps
// one UDP port a flow.
Topology permutation_topology(int hosts, NicModel model, const LeafSpec& shape) {
    const int leaves = hosts / kHostsPerLeaf;
    return make(fmt::format("topology: {{kind: leaf_spine, leaves: {}, hosts_per_leaf: {}, spines: {}}}\n"
                            "links: {{host: {{speed_gbps: 100}}, fabric: {{speed_gbps: {}}}}}\n"
                            "nic: {{model: {}, cc: connectx-default, mtu: {}, spraying: {}}}\n"
                            "switch: {{profile: lossless-100g}}\n",
                            leaves, kHostsPerLeaf, kSpines, shape.uplink_gbps, nic_model_name(model), shape.mtu,
                            model == NicModel::Rc));
}

// One flow per host, started at 0.
void add_permutation_flows(Fabric& f, const Topology& topo, int hosts, Flows flows) {
    Rng rng(1);
    Workload w;
    w.pattern = Pattern::Permutation;
    w.size = Bytes{1ull << 40};
    if (flows == Flows::Random) {
        for (const FlowSpec& fl : make_flows(topo, w, rng)) f.add_flow(fl);
    } else {
        for (int i = 0; i < hosts; ++i)
            f.add_flow(FlowSpec{static_cast<uint32_t>(i), static_cast<uint32_t>((i + kHostsPerLeaf) % hosts), w.size,
                                Nanos{0}, static_cast<uint16_t>(0xC000 | i)});
    }
}

// The warm-up lets the queues and the frame pool reach their steady state
// before the timed span (or the census).
constexpr Nanos kWarmup = Nanos::from_us(500);

// CPU ns per packet-hop of one flow per host on `hosts` hosts.
double permutation(int hosts, NicModel model, const LeafSpec& shape, Nanos span, Flows flows) {
    const int leaves = hosts / kHostsPerLeaf;
    const Topology topo = permutation_topology(hosts, model, shape);
    Fabric f(topo, 1);
    add_permutation_flows(f, topo, hosts, flows);
    const Figures r = timed_run(f, kWarmup, span);
    const double cost = r.cpu_s * 1e9 / static_cast<double>(r.packets);
    fmt::print(
        "[{}] {:>3} hosts ({} leaves, {} spines, uplinks {} Gbit/s), MTU {}, {}: {:.1f} simulated ms (after {:.1f} ms warm-up) in "
        "{:.2f} s wall, {:.2f} s CPU, {} packet-hops ({:.0f} per host), {:.2f} events each ({}), {} page faults, {} frame "
        "buffers ({} compact; {} in use, {:.1f} per host), {:.1f} MB built in its heap segment, {:.0f} CPU ns per packet-hop\n",
        nic_model_name(model), hosts, leaves, kSpines, shape.uplink_gbps, shape.mtu, flows_name(flows), span.ms(), kWarmup.ms(), r.wall_s, r.cpu_s, r.packets,
        static_cast<double>(r.packets) / hosts, static_cast<double>(r.events) / r.packets, events_by_kind(r),
        r.page_faults, r.frames,
        r.compact, r.in_use, static_cast<double>(r.in_use) / hosts, static_cast<double>(r.heap) / 1e6, cost);
    if (model == NicModel::Rc)
        fmt::print("[rc] {:>3} hosts, {}: {:.1f} Gbit/s a host received in order; {:.1f} % of packets arrived out "
                   "of sequence ({} placed directly); {} PSNs resent for selective NAKs, {} go-back-N retries\n",
                   hosts, flows_name(flows), static_cast<double>(r.rcvd_bytes) * 8 / span.seconds() / hosts / 1e9,
                   100.0 * static_cast<double>(r.out_of_seq) / static_cast<double>(std::max<uint64_t>(r.rcvd_pkts, 1)),
                   r.placed, r.selective, r.go_back_n);
    std::fflush(stdout);
    return cost;
}

// The pages windows of `window` virtual time touch after the permutation's
// warm-up (page_census.hpp), printed for page_census.sh.
void census(int hosts, NicModel model, const LeafSpec& shape, Flows flows, Nanos window) {
    constexpr uint64_t kWindows = 50;
    const Topology topo = permutation_topology(hosts, model, shape);
    Fabric f(topo, 1);
    add_permutation_flows(f, topo, hosts, flows);
    f.start();
    f.run(kWarmup);
    const uint64_t hops0 = f.totals().frames_delivered;
    const bench::CensusResult c = bench::page_census(kWindows, [&](uint64_t) { f.run(f.now() + window); });
    const double hops = static_cast<double>(f.totals().frames_delivered - hops0) / kWindows;
    const double pages = static_cast<double>(c.pages) / kWindows;
    fmt::print("[{}] {:>3} hosts, {}: page census, {} windows of {} ns after {:.1f} ms: {:.1f} pages a window ({:.1f} "
               "2 MiB ranges), {:.1f} packet-hops a window, {:.3f} pages a packet-hop{}\n-- by mapping:\n{}-- by code "
               "(pages a window, first touch):\n{}-- end\n",
               nic_model_name(model), hosts, flows_name(flows), kWindows, window.v, kWarmup.ms(), pages,
               static_cast<double>(c.huge_pages) / kWindows, hops, pages / hops,
               c.dropped ? fmt::format(" ({} first touches not recorded)", c.dropped) : "", c.by_mapping, c.by_code);
    std::fflush(stdout);
}

// The core's caches as sysfs describes them: "L1d 48K 12-way, L2 2048K 16-way, ...".
std::string cache_levels() {
    std::string out;
    for (int i = 0; i < 8; ++i) {
        const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
        const auto read = [&](const char* name) {
            std::ifstream f(dir + name);
            std::string v;
            std::getline(f, v);
            return v;
        };
        const std::string level = read("level");
        if (level.empty()) break;
        const std::string type = read("type");
        if (type == "Instruction") continue;
        out += fmt::format("{}L{}{} {} {}-way", out.empty() ? "" : ", ", level, type == "Data" ? "d" : "", read("size"),
                           read("ways_of_associativity"));
    }
    return out.empty() ? "unknown (no sysfs cache description)" : out;
}

// ns per load of a chase over `lines` lines, one in each `stride` bytes of
// `base`, in a random cycle: the cost of a miss that nothing overlaps, as a
// hop's walk event -> link -> node -> port -> queue pays it.
double chase_spread_ns(uint8_t* base, size_t lines, size_t stride) {
    std::vector<size_t> order(lines);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(1));
    // A line at a varying offset in its stride, so the lines use every cache set.
    const auto at = [&](size_t i) { return base + i * stride + (stride > 64 ? (i * 7 % (stride / 64)) * 64 : 0); };
    for (size_t i = 0; i < lines; ++i)
        *reinterpret_cast<uint8_t**>(at(order[i])) = at(order[(i + 1) % lines]);
    uint8_t* p = at(order[0]);
    for (size_t i = 0; i < 2 * lines; ++i) p = *reinterpret_cast<uint8_t**>(p);  // warm
    constexpr size_t kLoads = 2'000'000;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kLoads; ++i) p = *reinterpret_cast<uint8_t**>(p);
    const auto t1 = std::chrono::steady_clock::now();
    if (p == nullptr) std::puts("");  // keeps the chase
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / kLoads;
}

// The same over every line of `bytes` bytes.
double chase_ns(size_t bytes) {
    std::vector<uint8_t> mem(bytes + 64);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t{63});
    return chase_spread_ns(base, bytes / 64, 64);
}

// Whether a huge page is one TLB entry here. 4096 lines (256 KiB, in the L2)
// packed, then one per 4 KiB page of a 16 MiB range on transparent huge
// pages: 8 huge-page entries cover that range, so with 2 MiB TLB entries
// both chases cost an L2 hit; where a host maps its guest's memory with
// 4 KiB pages, each page is an entry of its own and the spread chase pays a
// page walk a load (fabric/README.md, Speed, "Pages").
void print_tlb() {
    constexpr size_t kHuge = size_t{2} << 20, kRange = size_t{16} << 20, kLines = 4096;
    void* m = mmap(nullptr, kRange + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m) + kHuge - 1) & ~(kHuge - 1));
    madvise(base, kRange, MADV_HUGEPAGE);
    std::fill_n(base, kRange, uint8_t{0});
    // The range's huge pages, as /proc/self/smaps counts them.
    size_t huge_kib = 0;
    std::ifstream smaps("/proc/self/smaps");
    bool ours = false;
    for (std::string line; std::getline(smaps, line);) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line; keys never match
            ours = lo <= reinterpret_cast<uintptr_t>(base) && reinterpret_cast<uintptr_t>(base) < hi;
            continue;
        }
        if (ours && line.rfind("AnonHugePages:", 0) == 0) huge_kib = std::strtoul(line.c_str() + 14, nullptr, 10);
    }
    double packed = 1e300, spread = 1e300;
    for (int r = 0; r < 3; ++r) {
        packed = std::min(packed, chase_spread_ns(base, kLines, 64));
        spread = std::min(spread, chase_spread_ns(base, kLines, 4096));
    }
    munmap(m, kRange + kHuge);
    const char* verdict = huge_kib < kRange / 1024 ? "the range did not get huge pages"
                          : spread > 1.5 * packed ? "a huge page is 4 KiB TLB entries here (a page walk a load)"
                                                  : "a huge page is one TLB entry here";
    fmt::print("TLB: 4096 lines one per 4 KiB page of 16 MiB ({} MiB on huge pages) {:.1f} ns a load, packed {:.1f} "
               "ns: {}\n",
               huge_kib / 1024, spread, packed, verdict);
}

// Leaves the heap scattered: blocks of every small size allocated in a
// random order, two in three freed (the rest returned, to be kept).
std::vector<void*> scatter_heap() {
    std::mt19937_64 rng(7);
    std::vector<void*> blocks(400000);
    for (void*& b : blocks) b = std::malloc(16 + rng() % 6000);
    std::vector<void*> kept;
    for (void* b : blocks) {
        if (rng() % 3 == 0)
            kept.push_back(b);
        else
            std::free(b);
    }
    return kept;
}

void print_caches() {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    fmt::print("malloc: GLIBC_TUNABLES={} (glibc.malloc.hugetlb=1: the heap on transparent huge pages, as rocemu "
               "runs; =0 to compare with 4 KiB pages)\n",
               tunables ? tunables : "");
    fmt::print("caches: {}\ndependent load latency (cheapest of 3):", cache_levels());
    for (const size_t kib : {64, 256, 512, 1024, 1536, 2048, 4096, 16384}) {
        double ns = 1e300;
        for (int r = 0; r < 3; ++r) ns = std::min(ns, chase_ns(kib * 1024));
        fmt::print(" {} KiB {:.1f} ns{}", kib, ns, kib == 16384 ? "\n" : ",");
    }
    print_tlb();
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    rocemu::restart_with_malloc_thp(argv);  // as rocemu does
    double incast_s = 1.0;
    bool run_incast = true;
    bool scatter = false;
    int repeat = 3;
    LeafSpec shape;
    std::vector<NicModel> models{NicModel::Rc, NicModel::Generator};
    std::vector<int> hosts{16, 64, 256};
    std::vector<Flows> flow_sets{Flows::Random, Flows::Shift};
    Nanos span = Nanos::from_us(2000);
    Nanos census_window{0};
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        const auto value = [&]() -> std::string_view {
            if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", a));
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            fmt::print("{}", kUsage);
            return 0;
        }
        if (a == "--model") {
            const std::string_view v = value();
            if (v == "rc")
                models = {NicModel::Rc};
            else if (v == "generator")
                models = {NicModel::Generator};
            else if (v != "both")
                usage_error(fmt::format("--model: '{}' is not rc, generator or both", v));
        } else if (a == "--hosts") {
            const std::string_view v = value();
            if (v == "16" || v == "32" || v == "64" || v == "128" || v == "256")
                hosts = {std::atoi(std::string(v).c_str())};
            else if (v == "sweep")
                hosts = {16, 32, 64, 128, 256};
            else if (v != "all")
                usage_error(fmt::format("--hosts: '{}' is not 16, 32, 64, 128, 256, all or sweep", v));
        } else if (a == "--flows") {
            const std::string_view v = value();
            if (v == "random")
                flow_sets = {Flows::Random};
            else if (v == "shift")
                flow_sets = {Flows::Shift};
            else if (v != "both")
                usage_error(fmt::format("--flows: '{}' is not random, shift or both", v));
        } else if (a == "--repeat") {
            const std::string v(value());
            repeat = std::atoi(v.c_str());
            if (repeat < 1 || repeat > 20) usage_error(fmt::format("--repeat: '{}' is not in [1, 20]", v));
        } else if (a == "--span-us") {
            const std::string v(value());
            const int us = std::atoi(v.c_str());
            if (us < 100 || us > 100000) usage_error(fmt::format("--span-us: '{}' is not in [100, 100000]", v));
            span = Nanos::from_us(us);
        } else if (a == "--mtu") {
            const std::string v(value());
            shape.mtu = std::atoi(v.c_str());
            if (shape.mtu != 1500 && shape.mtu != 4200 && shape.mtu != 9000)
                usage_error(fmt::format("--mtu: '{}' is not 1500, 4200 or 9000", v));
        } else if (a == "--uplink-gbps") {
            const std::string v(value());
            shape.uplink_gbps = std::atoi(v.c_str());
            if (shape.uplink_gbps != 100 && shape.uplink_gbps != 200 && shape.uplink_gbps != 400)
                usage_error(fmt::format("--uplink-gbps: '{}' is not 100, 200 or 400", v));
        } else if (a == "--page-census") {
            const std::string v(value());
            char* end = nullptr;
            const long long ns = std::strtoll(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0' || ns < 10 || ns > 1000000)
                usage_error(fmt::format("--page-census: '{}' is not a number of ns in [10, 1000000]", v));
            census_window = Nanos{ns};
        } else if (a == "--no-incast") {
            run_incast = false;
        } else if (a == "--scatter-heap") {
            scatter = true;
        } else if (a.starts_with("-")) {
            usage_error(fmt::format("unknown option '{}'", a));
        } else {
            char* end = nullptr;
            incast_s = std::strtod(argv[i], &end);
            if (end == argv[i] || *end != '\0' || !(incast_s > 0) || incast_s > 100)
                usage_error(fmt::format("'{}': INCAST_SECONDS is a number in (0, 100]", a));
        }
    }

    if (census_window > Nanos{0}) {
        for (const NicModel m : models)
            for (const int h : hosts)
                for (const Flows fl : flow_sets) census(h, m, shape, fl, census_window);
        return 0;
    }
    print_caches();
    const std::vector<void*> kept = scatter ? scatter_heap() : std::vector<void*>{};
    if (scatter) fmt::print("heap scattered: {} blocks kept of 400000\n", kept.size());
    if (run_incast)
        for (const NicModel m : models) incast(incast_s, m);
    for (const NicModel m : models) {
        // Interleaved rounds, the cheapest of each size kept: other load on
        // a shared machine only ever adds time.
        std::vector<std::vector<double>> cost(flow_sets.size(), std::vector<double>(hosts.size(), 1e300));
        for (int round = 0; round < repeat; ++round)
            for (std::size_t i = 0; i < hosts.size(); ++i)
                for (std::size_t k = 0; k < flow_sets.size(); ++k)
                    cost[k][i] = std::min(cost[k][i], permutation(hosts[i], m, shape, span, flow_sets[k]));
        for (std::size_t k = 0; k < flow_sets.size(); ++k)
            for (std::size_t i = 1; i < hosts.size(); ++i)
                fmt::print("[{}] CPU cost per packet-hop, {}, {} vs {} hosts: {:.0f} vs {:.0f} ns, {:.2f}x (target "
                           "within 1.30x)\n",
                           nic_model_name(m), flows_name(flow_sets[k]), hosts[i], hosts[0], cost[k][i], cost[k][0],
                           cost[k][i] / cost[k][0]);
    }
    return 0;
}
