// `rocemu pcap FILE...`: list RoCEv2 packets and verify every ICRC;
// `--merge OUT [--shift FILE=NS]...` first merges the files into one.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"
#include "tools/rocemu/commands.hpp"

namespace rocemu::cli {

namespace {

struct PcapOptions {
    std::vector<std::string> files;
    bool all = false;
    bool quiet = false;
    std::string merge;
    std::vector<std::string> shifts;
};

// --merge: the files into o.merge, each shifted as --shift says; on success
// the listing that follows reads the merged file alone.
bool merge_files(PcapOptions& o) {
    std::map<std::string, Nanos> shift;
    for (const std::string& v : o.shifts) {
        const size_t eq = v.rfind('=');
        int64_t ns = 0;
        const char* end = v.data() + v.size();
        const auto r = eq == std::string::npos ? std::from_chars_result{v.data(), std::errc::invalid_argument}
                                               : std::from_chars(v.data() + eq + 1, end, ns);
        if (eq == std::string::npos || eq == 0 || r.ec != std::errc{} || r.ptr != end) {
            fmt::print(stderr, "rocemu pcap: --shift '{}': expected FILE=NANOSECONDS, e.g. left.pcap=-1250000\n", v);
            return false;
        }
        const std::string file = v.substr(0, eq);
        if (std::find(o.files.begin(), o.files.end(), file) == o.files.end()) {
            fmt::print(stderr, "rocemu pcap: --shift '{}': {} is not one of the files to merge\n", v, file);
            return false;
        }
        shift[file] = Nanos{ns};
    }
    std::vector<pcap::MergeInput> in;
    for (const std::string& f : o.files) {
        // The same file under another name (./a.pcap, an absolute path, a
        // link) too: the merge would overwrite what it reads.
        std::error_code ec;
        if (f == o.merge || std::filesystem::equivalent(f, o.merge, ec)) {
            fmt::print(stderr, "rocemu pcap: --merge {}: that is one of the files to merge ({})\n", o.merge, f);
            return false;
        }
        const auto sh = shift.find(f);
        in.push_back({f, sh == shift.end() ? Nanos{0} : sh->second});
    }
    std::string error;
    const std::optional<uint64_t> frames = pcap::merge(in, o.merge, error);
    if (!frames) {
        fmt::print(stderr, "rocemu pcap: --merge: {}\n", error);
        return false;
    }
    fmt::print("# merged {} frames of {} files into {}\n", *frames, o.files.size(), o.merge);
    o.files = {o.merge};
    return true;
}

// Seconds since the first frame, to the nanosecond; a frame stamped before
// the first (a capture's clock stepped back) is negative.
std::string relative_time(Nanos d) {
    const uint64_t a = d.v < 0 ? 0 - static_cast<uint64_t>(d.v) : static_cast<uint64_t>(d.v);
    return fmt::format("{}{}.{:09}", d.v < 0 ? "-" : "", a / 1000000000, a % 1000000000);
}

int run_pcap(PcapOptions o) {
    if (!o.merge.empty() && !merge_files(o)) return 2;
    if (o.merge.empty() && !o.shifts.empty()) {
        fmt::print(stderr, "rocemu pcap: --shift needs --merge\n");
        return 2;
    }
    uint64_t packets = 0, bad = 0;
    for (const std::string& path : o.files) {
        pcap::Reader reader(path);
        if (!reader.ok()) {
            fmt::print(stderr, "rocemu pcap: cannot open {}: {}\n", path, reader.error());
            return 2;
        }
        if (reader.link_type() != 1) {
            fmt::print(stderr, "rocemu pcap: {}: link type {} is not Ethernet\n", path, reader.link_type());
            return 2;
        }
        if (o.files.size() > 1 && !o.quiet) fmt::print("# {}\n", path);
        pcap::Frame f;
        uint64_t index = 0;
        Nanos first{-1};
        while (reader.next(f)) {
            ++index;
            if (first.v < 0) first = f.ts;
            const std::string rel = relative_time(f.ts - first);
            const std::span<const uint8_t> bytes(f.data);
            if (wire::classify(bytes) != wire::FrameKind::Roce) {
                if (o.all && !o.quiet)
                    fmt::print("{:6} {:>13} {}\n", index, rel, wire::describe_other(bytes));
                continue;
            }
            wire::RocePacket p;
            const wire::ParseError e = wire::parse_roce(bytes, p);
            ++packets;
            if (e != wire::ParseError::Ok) ++bad;
            if (!o.quiet || e != wire::ParseError::Ok)
                fmt::print("{:6} {:>13} {}\n", index, rel, wire::describe_roce(p, e));
        }
        if (!reader.error().empty()) {
            fmt::print(stderr, "rocemu pcap: {}: {}\n", path, reader.error());
            return 2;
        }
    }
    fmt::print("{} packets, {} ICRC errors\n", packets, bad);
    return bad == 0 ? 0 : 1;
}

}  // namespace

void add_pcap_command(CLI::App& app, int& status) {
    auto o = std::make_shared<PcapOptions>();
    CLI::App* cmd = app.add_subcommand(
        "pcap",
        "List the RoCEv2 packets (UDP port 4791, IPv4 or IPv6, optionally VLAN-tagged) in pcap files, one line each, "
        "and verify every ICRC the way Linux rxe computes it.\n"
        "Each line: frame number, time since the first frame, source IP:UDP source port > destination IP, opcode, "
        "destination QPN, PSN, flags (A=AckReq S=SE F=FECN B=BECN), the extended headers' key fields, payload "
        "length and the verdict (icrc=ok, icrc=BAD, or error=<parse error>). The last line is 'N packets, M ICRC "
        "errors' where M counts every RoCEv2 packet that failed to parse or verify.\n"
        "Frames that are not RoCEv2 (ARP, PFC and PAUSE, TCP and other IP) are skipped, or listed briefly with --all.\n"
        "With --merge OUT the files are first merged into OUT in time-stamp order (a live fabric split across "
        "machines leaves a link's capture in one file per machine: shift each by minus its machine's clock offset, "
        "which the hosts node prints) and OUT is listed.\n"
        "Exit status: 0 if every RoCEv2 packet verifies, 1 if any fails, 2 if a file cannot be read.");
    cmd->add_option("files", o->files, "pcap or pcapng files (Ethernet)")->required()->check(CLI::ExistingFile);
    cmd->add_flag("-a,--all", o->all, "also list non-RoCEv2 frames briefly (ARP, PFC, PAUSE, other IP)");
    cmd->add_flag("-q,--quiet", o->quiet, "print only failing packets and the summary");
    cmd->add_option("--merge", o->merge, "merge the files into this pcap (time-stamp order), then list it")
        ->check(kNonEmpty);
    cmd->add_option("--shift", o->shifts,
                    "FILE=NS: add NS nanoseconds (may be negative) to FILE's time stamps before merging; repeatable")
        ->allow_extra_args(false);
    cmd->callback([o, &status] { status = run_pcap(*o); });
}

}  // namespace rocemu::cli
