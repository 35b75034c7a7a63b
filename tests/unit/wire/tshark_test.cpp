// A pcap written by rocemu is read back by tshark, which decodes the fields.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/l2.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {
namespace {

std::string run(const std::string& cmd) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    return out;
}

TEST(Tshark, DecodesOpcodesAndPsnsOfAWrittenPcap) {
    ASSERT_EQ(system("command -v tshark >/dev/null 2>&1"), 0) << "tshark is required (scripts/install-deps.sh)";
    const std::string path =
        (std::filesystem::temp_directory_path() / ("rocemu_tshark_" + std::to_string(getpid()) + ".pcap")).string();
    const std::vector<uint8_t> opcodes = {op::SEND_FIRST, op::SEND_MIDDLE,  op::SEND_LAST,  op::WRITE_ONLY,
                                          op::READ_REQUEST, op::ACKNOWLEDGE, op::FETCH_ADD, op::ATOMIC_ACKNOWLEDGE};
    std::vector<uint8_t> payload(256, 0x5A);
    {
        pcap::Writer w(path);
        ASSERT_TRUE(w.ok()) << w.error();
        std::vector<uint8_t> f(2048);
        for (size_t i = 0; i < opcodes.size(); ++i) {
            RocePacket p;
            p.l3.src = IpAddr::from_v4(0x0A000001);
            p.l3.dst = IpAddr::from_v4(0x0A000002);
            p.bth.opcode = opcodes[i];
            p.bth.psn = Psn{static_cast<uint32_t>(0xFFFFFE + i)};  // crosses the 24-bit wrap
            p.bth.dqpn = Qpn{0x11};
            if (opcode_info(opcodes[i]).flags & kOpPayload) {
                p.payload = payload.data();
                p.payload_len = 256;
            }
            w.write(Nanos{static_cast<int64_t>(1000000000 + i * 1500)}, std::span(f.data(), encode_roce(p, f)));
        }
        Pfc pfc;
        pfc.class_enable = 0x08;
        pfc.quanta[3] = 0xFFFF;
        w.write(Nanos{2000000000}, std::span(f.data(), encode_pfc(pfc, f)));
    }
    const std::string out = run("tshark -r " + path +
                                " -d udp.port==4791,infiniband -T fields -e infiniband.bth.opcode -e infiniband.bth.psn "
                                "-e frame.time_epoch 2>/dev/null");
    std::istringstream lines(out);
    std::string line;
    size_t i = 0;
    while (std::getline(lines, line) && i < opcodes.size()) {
        std::istringstream fields(line);
        unsigned opcode = 0, psn = 0;
        std::string ts;
        fields >> opcode >> psn >> ts;
        EXPECT_EQ(opcode, opcodes[i]) << line;
        EXPECT_EQ(psn, (0xFFFFFEu + i) & 0xFFFFFF) << line;
        char frac[16];
        snprintf(frac, sizeof frac, ".%09zu", i * 1500);
        EXPECT_NE(ts.find(frac), std::string::npos) << "nanosecond timestamps: " << ts;
        ++i;
    }
    EXPECT_EQ(i, opcodes.size()) << out;
    const std::string pfc = run("tshark -r " + path +
                                " -Y macc -T fields -e macc.opcode -e macc.cbfc.enbv.c3 -e macc.cbfc.pause_time.c3 2>/dev/null");
    EXPECT_EQ(pfc, "0x0101\t1\t65535\n") << "tshark decodes the PFC frame";
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace rocemu::wire
