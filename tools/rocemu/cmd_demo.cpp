// `rocemu demo`: the built-in main job. It builds a short RoCEv2 conversation
// with the wire layer (one message of each kind, segmented at the path MTU),
// writes it to a pcap, then reads the file back and verifies every ICRC.
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"
#include "tools/rocemu/commands.hpp"

namespace rocemu::cli {

namespace {

int run_demo(const std::string& out_dir) {
    using namespace wire;
    std::filesystem::create_directories(out_dir);
    const std::string path = out_dir + "/demo.pcap";
    std::vector<uint8_t> payload(3000);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);

    RocePacket base;
    base.l2.src = MacAddr{{0x02, 0, 0, 0, 0, 1}};
    base.l2.dst = MacAddr{{0x02, 0, 0, 0, 0, 2}};
    base.l3.src = IpAddr::from_v4(0x0A000001);
    base.l3.dst = IpAddr::from_v4(0x0A000002);
    base.l3.ecn = ecn::kEct0;
    base.bth.dqpn = Qpn{0x12};
    {
        pcap::Writer w(path);
        if (!w.ok()) {
            fmt::print(stderr, "rocemu demo: cannot write {}: {}\n", path, w.error());
            return 2;
        }
        std::vector<uint8_t> frame(9216);
        Nanos t{0};
        uint32_t psn = 0;
        auto emit = [&](RocePacket p) {
            p.bth.psn = Psn{psn++};
            p.l3.ip_id = static_cast<uint16_t>(psn);
            const size_t n = encode_roce(p, frame);
            w.write(t, std::span(frame.data(), n));
            t += Nanos{1000};
        };
        const uint32_t mtu = 1024;
        for (uint32_t off = 0; off < payload.size(); off += mtu) {  // SEND FIRST/MIDDLE/LAST
            RocePacket p = base;
            const bool last = off + mtu >= payload.size();
            p.bth.opcode = off == 0 ? op::SEND_FIRST : last ? op::SEND_LAST : op::SEND_MIDDLE;
            p.bth.ackreq = last;
            p.payload = payload.data() + off;
            p.payload_len = last ? static_cast<uint32_t>(payload.size() - off) : mtu;
            emit(p);
        }
        RocePacket wr = base;
        wr.bth.opcode = op::WRITE_ONLY_IMM;
        wr.bth.ackreq = true;
        wr.reth = {0x10000, 0x1234, 61};
        wr.imm = 0xC0FFEE;
        wr.payload = payload.data();
        wr.payload_len = 61;
        emit(wr);
        RocePacket fa = base;
        fa.bth.opcode = op::FETCH_ADD;
        fa.bth.ackreq = true;
        fa.atomic = {0x20000, 0x1234, 5, 0};
        emit(fa);
        RocePacket cnp = base;
        cnp.bth.opcode = op::CNP;
        cnp.bth.becn = true;
        cnp.l3.dscp = 48;
        cnp.l3.ecn = ecn::kNotEct;
        emit(cnp);
    }
    pcap::Reader r(path);
    pcap::Frame f;
    uint64_t n = 0, bad = 0;
    while (r.next(f)) {
        RocePacket p;
        const ParseError e = parse_roce(f.data, p);
        ++n;
        bad += e != ParseError::Ok;
        fmt::print("{}\n", describe_roce(p, e));
    }
    fmt::print("{} packets, {} ICRC errors\nwrote {}  (verify: rocemu pcap {})\n", n, bad, path, path);
    return bad == 0 ? 0 : 1;
}

}  // namespace

void add_demo_command(CLI::App& app, int& status) {
    auto out = std::make_shared<std::string>("out");
    CLI::App* cmd = app.add_subcommand("demo", "Build a short RoCEv2 conversation, write it to a pcap and verify it");
    cmd->add_option("-o,--out", *out, "output folder")->capture_default_str();
    cmd->callback([out, &status] { status = run_demo(*out); });
}

}  // namespace rocemu::cli
