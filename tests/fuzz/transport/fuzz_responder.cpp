// libFuzzer target: random frames into a live engine whose RC QP is in RTS
// with receives posted and a registered MR. Each input is delivered three
// ways: as is; with the destination IP and QPN patched to the live QP, an
// RDMA/atomic request's rkey and VA pointed into the MR, and the ICRC (and
// IPv4 checksum) recomputed, so the fuzzer gets past the integrity and
// access checks into the responder and completer; and once more after a
// timer tick. Whatever the engine sends back is pulled and discarded.
// The patched frame is also delivered with a stretch of it zeroed and
// vouched for (on_frame's zero_from), and the raw input with zero_from
// wrong. Every input goes to two engines: one copying, one with zero_copy_min 512,
// whose READ responses lend the MR's bytes (TxFrame::ext); those must lie
// inside the registered MR, and their pins are released as a runtime does.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/wire.hpp"
#include "tests/fuzz/common/engine_io.hpp"
#include "tests/fuzz/common/rc_qp.hpp"

using namespace rocemu;
using namespace rocemu::transport;

namespace {

struct Target {
    std::unique_ptr<Engine> eng;
    Qpn qpn;
    PdHandle pd;
    CqHandle cq;
    MrHandle mr;
    std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 16);
    std::vector<std::vector<uint8_t>> bufs = std::vector<std::vector<uint8_t>>(16, std::vector<uint8_t>(9216));
    Nanos now{0};
    Effects fx;
    wire::IpAddr local = wire::IpAddr::from_v4(0x0A000002);
    wire::IpAddr peer = wire::IpAddr::from_v4(0x0A000001);

    uint32_t zero_copy_min = 0;

    explicit Target(uint32_t zc = 0) : zero_copy_min(zc) {
        EngineConfig c;
        c.zero_copy_min = zc;
        c.mac = wire::MacAddr{{2, 0, 0, 0, 0, 2}};
        c.gids = {local};
        VerbsError e;
        eng = Engine::create(c, e);
        pd = eng->alloc_pd().value;
        cq = eng->create_cq(4096).value;
        mr = eng->reg_mr(pd, mem.data(), mem.size(), kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic).value;
        QpInitAttr ia;
        ia.pd = pd;
        ia.send_cq = ia.recv_cq = cq;
        qpn = eng->create_qp(ia).value;
        fuzz::rc_to_rts(*eng, qpn, peer, QpAttr{}, fx);
    }

    // Keeps the QP usable: back to RTS after an error, RECVs topped up, CQ drained.
    void keep_alive() {
        QpAttr a;
        QpInitAttr ia;
        eng->query_qp(qpn, a, ia);
        if (a.qp_state == QpState::Err) {
            *this = Target(zero_copy_min);
            return;
        }
        fuzz::drain_cq(*eng, cq, [](const Wc&) {});
        RecvWr r;
        r.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(mem.data()), 4096, mr.lkey});
        eng->post_recv(qpn, std::span<const RecvWr>(&r, 1), fx);
    }

    void deliver(std::span<const uint8_t> frame, size_t zero_from = SIZE_MAX) {
        now += Nanos{1000};
        eng->on_frame(frame, now, fx, zero_from);
        fuzz::drain_tx(*eng, bufs, now, fx, [&](TxFrame& f) {
            if (f.ext && (f.ext < mem.data() || f.ext + f.ext_len > mem.data() + mem.size())) {
                std::fprintf(stderr, "fuzz_responder invariant: a zero-copy frame lends bytes outside the MR\n");
                std::abort();
            }
            if (f.pin) f.pin->fetch_sub(1, std::memory_order_release);
        });
        fx.clear();
    }
};

// Points a parsed frame at the live QP and makes its checksums right.
bool patch(std::vector<uint8_t>& f, const Target& t) {
    wire::RocePacket p;
    const wire::ParseError e = wire::parse_roce(f, p, {.verify_icrc = false});
    if (e != wire::ParseError::Ok) return false;
    uint8_t* ip = f.data() + p.l3_off;
    if (p.l3.v6) {
        std::memcpy(ip + 8, t.peer.b.data(), 16);
        std::memcpy(ip + 24, t.local.b.data(), 16);
    } else {
        wire::store_be32(ip + 12, t.peer.v4());
        wire::store_be32(ip + 16, t.local.v4());
        wire::store_be16(ip + 10, 0);
        wire::store_be16(ip + 10, wire::ip_checksum(ip, 20));
    }
    wire::store_be24(f.data() + p.bth_off + 5, t.qpn.v);
    // RDMA and atomic requests name the live MR (rkey, a VA inside it that
    // leaves room for the length), so WRITEs, READs (zero copy too) and
    // atomics execute.
    const wire::OpcodeInfo& info = p.info();
    const uint64_t base = reinterpret_cast<uint64_t>(t.mem.data());
    if (info.has(wire::Hdr::Reth)) {
        uint8_t* reth = f.data() + p.bth_off + info.offset[static_cast<int>(wire::Hdr::Reth)];
        const uint64_t room = t.mem.size() - std::min<uint64_t>(p.reth.dma_len, t.mem.size());
        wire::store_be64(reth, base + p.reth.va % (room + 1));
        wire::store_be32(reth + 8, t.mr.rkey);
    }
    if (info.has(wire::Hdr::AtomicEth)) {
        uint8_t* ae = f.data() + p.bth_off + info.offset[static_cast<int>(wire::Hdr::AtomicEth)];
        wire::store_be64(ae, base + (p.atomic.va % (t.mem.size() / 8)) * 8);
        wire::store_be32(ae + 8, t.mr.rkey);
    }
    wire::store_be16(f.data() + p.bth_off + 2, wire::kDefaultPkey);
    const size_t icrc_off = p.frame_len - wire::kIcrcLen;
    wire::store_le32(f.data() + icrc_off, wire::compute_icrc(ip, icrc_off - p.l3_off, p.l3.v6));
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static Target* const targets[] = {new Target(), new Target(512)};
    for (Target* t : targets) {
        t->keep_alive();
        t->deliver(std::span<const uint8_t>(data, size));
        std::vector<uint8_t> f(data, data + size);
        if (patch(f, *t)) {
            t->deliver(f);
            t->now += Nanos::from_ms(10);
            t->eng->on_timer(t->now, t->fx);
            t->deliver(f);
            // Zeros the caller vouches for (the fabric's frame pool does):
            // from a point the input picks to the ICRC, which is made right.
            const size_t icrc_off = f.size() >= 4 ? f.size() - 4 : 0;
            const size_t from = size > 0 ? data[0] * icrc_off / 255 : icrc_off;
            std::fill(f.begin() + static_cast<ptrdiff_t>(from), f.begin() + static_cast<ptrdiff_t>(icrc_off), 0);
            if (patch(f, *t)) t->deliver(f, from);
        }
        // A caller wrong about them must not crash the engine either.
        t->deliver(std::span<const uint8_t>(data, size), size > 1 ? data[1] : 0);
    }
    return 0;
}
