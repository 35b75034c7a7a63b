// `rocemu pcap FILE...`: list RoCEv2 packets and verify every ICRC.
#include <fmt/format.h>

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
};

int run_pcap(const PcapOptions& o) {
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
            const Nanos rel = f.ts - first;
            const std::span<const uint8_t> bytes(f.data);
            if (wire::classify(bytes) != wire::FrameKind::Roce) {
                if (o.all && !o.quiet)
                    fmt::print("{:6} {:>3}.{:09} {}\n", index, rel.v / 1000000000, rel.v % 1000000000,
                               wire::describe_other(bytes));
                continue;
            }
            wire::RocePacket p;
            const wire::ParseError e = wire::parse_roce(bytes, p);
            ++packets;
            if (e != wire::ParseError::Ok) ++bad;
            if (!o.quiet || e != wire::ParseError::Ok)
                fmt::print("{:6} {:>3}.{:09} {}\n", index, rel.v / 1000000000, rel.v % 1000000000,
                           wire::describe_roce(p, e));
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
        "Exit status: 0 if every RoCEv2 packet verifies, 1 if any fails, 2 if a file cannot be read.");
    cmd->add_option("files", o->files, "pcap or pcapng files (Ethernet)")->required()->check(CLI::ExistingFile);
    cmd->add_flag("-a,--all", o->all, "also list non-RoCEv2 frames briefly (ARP, PFC, PAUSE, other IP)");
    cmd->add_flag("-q,--quiet", o->quiet, "print only failing packets and the summary");
    cmd->callback([o, &status] { status = run_pcap(*o); });
}

}  // namespace rocemu::cli
