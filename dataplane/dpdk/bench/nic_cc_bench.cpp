// What DCQCN costs the live NIC and whether it paces: two NICs over a crossed
// net_ring pair in one thread, 64 KiB WRITEs kept in flight for a fixed time.
// Same run: CC none (the baseline), DCQCN released at line rate, and DCQCN
// held at a lower maximum rate (rpg_max_rate), whose goodput must follow it.
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/roce_nic.hpp"

using namespace rocemu;
using namespace rocemu::dpdk;
using namespace rocemu::transport;

namespace {

constexpr uint32_t kMsg = 65536;
constexpr uint32_t kDepth = 16;
constexpr size_t kBuf = size_t{kMsg} * kDepth;

struct BenchNic {
    std::unique_ptr<Port> port;
    host::HostStack stack;
    std::unique_ptr<Engine> engine;
    std::unique_ptr<EngineUpper> upper;
    std::unique_ptr<Nic<EngineUpper>> nic;
    CqHandle cq;
    Qpn qpn;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
    MrHandle mr;

    BenchNic(const RingPair& rings, int side, const std::string& name, uint8_t last, const NicProfile& p,
             const TscClock& clock)
        : stack(host(last)) {
        PortConfig pc;
        pc.mbufs = 4095;
        pc.min_frame_room = Engine::kMinTxBuf;
        std::string error;
        port = rings.port(side, name, pc, error);
        if (!port) throw std::runtime_error(error);
        VerbsError e;
        engine = Engine::create(engine_config(stack, p), e);
        upper = std::make_unique<EngineUpper>(*engine, p);
        NicConfig nc = nic_config(p);
        nc.tx_drain = Nanos{0};
        nic = std::make_unique<Nic<EngineUpper>>(*port, stack, *upper, clock, nullptr, nc);
        const PdHandle pd = engine->alloc_pd().value;
        cq = engine->create_cq(4096).value;
        mr = engine->reg_mr(pd, buf.data(), buf.size(), kLocalWrite | kRemoteWrite).value;
        QpInitAttr ia;
        ia.pd = pd;
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.peer_accepts_cnp = p.cnp_enabled();
        qpn = engine->create_qp(ia).value;
    }
    static host::HostConfig host(uint8_t last) {
        host::HostConfig c;
        c.mac = wire::MacAddr{{0x02, 0, 0, 0, 0, last}};
        c.ipv4 = 0x0A000000u + last;
        c.port_mtu = Bytes{9000};
        return c;
    }
};

struct RunResult {
    double gbps = 0;          // over the wall time
    double running_gbps = 0;  // over the time the loop ran: turns more than 1 ms apart (the thread
                              // was descheduled on the shared machine) are left out
    double stalled = 0;       // share of the wall time left out
};

// `seconds` of WRITEs from a to b.
RunResult run(const NicProfile& profile, double seconds) {
    static int serial = 0;
    const std::string s = std::to_string(serial++);
    std::string error;
    const std::unique_ptr<RingPair> rings = RingPair::create("bench" + s, 4096, error);
    if (!rings) throw std::runtime_error(error);
    const TscClock clock = TscClock::starting_now();
    RunResult res;
    {
        BenchNic a(*rings, 0, "bench_a" + s, 1, profile, clock);
        BenchNic b(*rings, 1, "bench_b" + s, 2, profile, clock);
        BenchNic* n[2] = {&a, &b};
        auto poll = [&] {
            a.nic->poll();
            b.nic->poll();
        };
        for (int i = 0; i < 2; ++i) {
            BenchNic& me = *n[i];
            QpAttr at;
            at.qp_state = QpState::Init;
            at.qp_access_flags = kRemoteWrite;
            me.engine->modify_qp(me.qpn, at, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags,
                                 me.upper->effects());
            at.qp_state = QpState::Rtr;
            at.dest_qp_num = n[1 - i]->qpn;
            at.rq_psn = Psn{0};
            at.path_mtu = PathMtu::Mtu4096;
            at.ah_attr.dgid = wire::IpAddr::from_v4(n[1 - i]->stack.config().ipv4);
            at.ah_attr.sgid_index = 3;
            const Nanos give_up = clock.now() + Nanos::from_s(3);
            while (fill_av(*me.nic, at.ah_attr, me.qpn.v).status == host::PathResult::Status::Pending &&
                   clock.now() < give_up)
                poll();
            me.engine->modify_qp(me.qpn, at,
                                 kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                     kAttrMaxDestRdAtomic | kAttrMinRnrTimer,
                                 me.upper->effects());
            at.qp_state = QpState::Rts;
            at.sq_psn = Psn{0};
            me.engine->modify_qp(me.qpn, at,
                                 kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                                     kAttrMaxQpRdAtomic,
                                 me.upper->effects());
        }
        uint64_t posted = 0, done = 0;
        uint32_t in_flight = 0;
        Wc wc[64];
        const Nanos t0 = clock.now();
        const Nanos end = t0 + Nanos::from_s(seconds);
        Nanos now = t0;
        Nanos stalled{0};
        while (now < end) {
            for (uint32_t k; (k = a.engine->poll_cq(a.cq, wc)) > 0;) {
                in_flight -= k;
                done += k;
            }
            while (in_flight < kDepth) {
                SendWr w;
                w.opcode = WrOpcode::RdmaWrite;
                w.send_flags = kSendSignaled;
                const uint64_t off = (posted % kDepth) * kMsg;
                w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(a.buf.data() + off), kMsg, a.mr.lkey});
                w.remote_addr = reinterpret_cast<uint64_t>(b.buf.data() + off);
                w.rkey = b.mr.rkey;
                if (a.engine->post_send(a.qpn, std::span(&w, 1), a.upper->effects())) break;
                ++posted;
                ++in_flight;
            }
            a.upper->effects().clear();
            b.upper->effects().clear();
            poll();
            const Nanos was = now;
            now = clock.now();
            if (now - was > Nanos::from_ms(1)) stalled = stalled + (now - was);
        }
        const double bits = static_cast<double>(done) * kMsg * 8;
        res.gbps = bits / (now - t0).seconds() / 1e9;
        res.running_gbps = bits / (now - t0 - stalled).seconds() / 1e9;
        res.stalled = stalled.seconds() / (now - t0).seconds();
    }
    return res;
}

}  // namespace

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
    std::string error;
    if (!Eal::init({"--log-level", "lib.eal:error"}, error)) {
        fmt::print(stderr, "nic_cc_bench: {}\n", error);
        return 2;
    }
    NicProfile none;
    none.cc.algorithm = cc::CcAlgorithm::kNone;
    const NicProfile dcqcn;
    fmt::print("64 KiB WRITE goodput over net_ring, one thread for both NICs, {:.1f} s each; \"running\" leaves out\n"
               "the time the thread was descheduled (turns > 1 ms apart), which a paced QP cannot make up\n",
               seconds);
    fmt::print("{:<34} {:>8} {:>9} {:>8}\n", "", "Gbit/s", "running", "stalled");
    auto row = [](const std::string& name, const RunResult& r, const std::string& vs) {
        fmt::print("{:<34} {:>8.2f} {:>9.2f} {:>7.1f}%  {}\n", name, r.gbps, r.running_gbps, 100 * r.stalled, vs);
    };
    const RunResult base = run(none, seconds);
    row("cc none", base, "(baseline)");
    const RunResult released = run(dcqcn, seconds);
    row("dcqcn, released at 100 Gbit/s", released,
        fmt::format("{:.1f}% of baseline (running)", 100 * released.running_gbps / base.running_gbps));
    // A 4096-byte payload travels in 4154 bytes (Ethernet, IPv4, UDP, BTH, ICRC; RETH on the first):
    // a QP paced at C carries at most 98.6% of C as goodput.
    for (const double cap : {1.0, 4.0}) {
        NicProfile held = dcqcn;
        held.cc.dcqcn.rpg_max_rate = BitsPerSec::gbps(cap);
        const RunResult r = run(held, seconds);
        row(fmt::format("dcqcn, rpg_max_rate {:.0f} Gbit/s", cap), r,
            fmt::format("{:.1f}% of the cap (running; at most 98.6%)", 100 * r.running_gbps / cap));
    }
    Eal::cleanup();
    return 0;
}
