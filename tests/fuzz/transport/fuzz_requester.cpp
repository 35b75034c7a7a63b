// libFuzzer target: the requester and completer of an RC QP in RTS with work
// outstanding (SEND, WRITE, READ, CMP_SWAP, FETCH_ADD, some with immediate,
// some unsignaled), fed random *responses*. The input is a script, a few
// bytes per step:
//   answer:   the right response to the oldest request the QP sent and not
//             answered yet (ACK, ATOMIC ACKNOWLEDGE, every READ RESPONSE
//             packet or only the first few), so the fuzzer gets deep into
//             completions without guessing PSNs;
//   response: opcode (ACK, NAK with its syndromes incl. RNR, PSN sequence
//             error, remote access, READ RESPONSE FIRST/MIDDLE/LAST/ONLY,
//             ATOMIC ACKNOWLEDGE), PSN near the window the QP has sent, MSN,
//             AETH credit/timer, atomic-ack value, payload length; encoded
//             with a correct ICRC and IPv4 checksum so it passes integrity
//             checks, and delivered flat or as a two-segment chain;
//   timer:    time advanced to the next timer (retransmit, RNR wait) or a
//             little, then on_timer;
//   post:     a new WR;
//   pump:     tx_burst, noting the PSNs the QP sent.
// Invariants checked (abort on failure):
//   - completions come in posting order: a completion names the oldest
//     outstanding WR, or a later one when every WR before it was unsignaled
//     (and so completed silently); never a WR that was not posted;
//   - a successful completion has the WR's opcode, and for READ/atomic a
//     length inside its SGEs;
//   - READ responses and atomic acks write host memory only inside the SGEs
//     of posted READ/atomic WRs: everything else of the MR keeps its guard
//     bytes;
//   - after the QP enters the error state and the CQ is drained, every WR
//     posted has completed (flushed).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "tests/fuzz/common/engine_io.hpp"
#include "tests/fuzz/common/fuzz_input.hpp"
#include "tests/fuzz/common/rc_qp.hpp"

#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"

using namespace rocemu;
using namespace rocemu::transport;

namespace {

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kMemLen = 1 << 14;  // READ/atomic targets, guard bytes elsewhere
constexpr size_t kSrcLen = 1 << 14;  // SEND/WRITE sources

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_requester", what); }
// ROCEMU_FUZZ_TRACE=1: print each step, to read why an input fails.
const bool kTrace = std::getenv("ROCEMU_FUZZ_TRACE") != nullptr;
using fuzz::Input;

struct Posted {
    uint64_t wr_id;
    WrOpcode op;
    bool signaled;
    uint32_t len;  // total SGE length
};

WcOpcode wc_opcode(WrOpcode op) {
    switch (op) {
        case WrOpcode::Send:
        case WrOpcode::SendWithImm: return WcOpcode::Send;
        case WrOpcode::RdmaWrite:
        case WrOpcode::RdmaWriteWithImm: return WcOpcode::RdmaWrite;
        case WrOpcode::RdmaRead: return WcOpcode::RdmaRead;
        case WrOpcode::AtomicCmpAndSwp: return WcOpcode::CompSwap;
        case WrOpcode::AtomicFetchAndAdd: return WcOpcode::FetchAdd;
    }
    return WcOpcode::Recv;
}

struct Target {
    std::unique_ptr<Engine> eng;
    Qpn qpn;
    PdHandle pd;
    CqHandle scq, rcq;
    MrHandle mr, src_mr;
    std::vector<uint8_t> mem = std::vector<uint8_t>(kMemLen, kGuard);
    std::vector<std::pair<size_t, size_t>> allowed;  // offset and length of each posted READ/atomic SGE
    const std::vector<uint8_t> guard_image = std::vector<uint8_t>(kMemLen, kGuard);
    std::vector<uint8_t> scratch;
    std::vector<uint8_t> src = std::vector<uint8_t>(kSrcLen, 0x5A);
    std::vector<std::vector<uint8_t>>& bufs = fuzz::tx_buffers();
    std::vector<uint8_t> rx = std::vector<uint8_t>(9216 + 64);
    std::deque<Posted> posted;
    struct WireReq {
        uint32_t psn;
        bool read, atomic;
        uint32_t read_len;
    };
    std::deque<WireReq> wire_reqs;  // requests sent and not answered by answer() yet
    uint32_t next_req_psn = 0;
    uint32_t msn = 0;
    uint64_t next_wr_id = 1;
    uint32_t lo_psn = 0, hi_psn = 0;  // lowest and highest PSN the QP has sent since the last ACK we made
    Nanos now{0};
    Effects fx;
    wire::MacAddr mac{{2, 0, 0, 0, 0, 2}};
    wire::IpAddr local = wire::IpAddr::from_v4(0x0A000002);
    wire::IpAddr peer = wire::IpAddr::from_v4(0x0A000001);

    Target() {
        EngineConfig c;
        c.mac = mac;
        c.gids = {local};
        c.max_qp = 2;  // a fresh engine per input: keep it small
        c.max_mr = 4;
        c.max_cq = 4;
        c.max_srq = 1;
        c.max_ah = 1;
        VerbsError e;
        eng = Engine::create(c, e);
        pd = eng->alloc_pd().value;
        scq = eng->create_cq(256).value;  // > max_send_wr; polled every step
        rcq = eng->create_cq(16).value;
        mr = eng->reg_mr(pd, mem.data(), mem.size(), kLocalWrite).value;
        src_mr = eng->reg_mr(pd, src.data(), src.size(), 0).value;
        QpInitAttr ia;
        ia.pd = pd;
        ia.send_cq = scq;
        ia.recv_cq = rcq;
        ia.cap.max_send_wr = 64;
        qpn = eng->create_qp(ia).value;
        QpAttr a;
        a.sq_psn = Psn{0xFFFFF0};  // wraps soon: the window straddles 2^24
        a.timeout = 10;
        a.retry_cnt = 3;
        a.rnr_retry = 3;
        a.max_rd_atomic = 4;
        if (fuzz::rc_to_rts(*eng, qpn, peer, a, fx).err) fail("setup");
        lo_psn = hi_psn = 0xFFFFF0;
    }

    bool in_error() const {
        QpAttr a;
        QpInitAttr ia;
        eng->query_qp(qpn, a, ia);
        return a.qp_state == QpState::Err;
    }

    // With libc calls rather than a byte loop: a loop under coverage
    // instrumentation took most of the time of a run.
    void check_guards() {
        scratch = mem;
        for (const auto& [off, len] : allowed) std::memset(scratch.data() + off, kGuard, len);
        if (std::memcmp(scratch.data(), guard_image.data(), kMemLen) != 0)
            fail("host memory written outside the posted READ/atomic SGEs");
    }

    void poll() {
        fuzz::drain_cq(*eng, scq, [&](const Wc& wc) {
            if (kTrace)
                std::fprintf(stderr, "  wc wr_id %lu status %s opcode %d len %u\n", static_cast<unsigned long>(wc.wr_id),
                             to_string(wc.status), static_cast<int>(wc.opcode), wc.byte_len);
            // Every WR before the one completed must have been unsignaled
            // (and so completed silently: had it failed or been flushed,
            // its own completion would have come first).
            while (!posted.empty() && posted.front().wr_id != wc.wr_id) {
                if (posted.front().signaled) fail("completion out of posting order (or skipped a signaled WR)");
                posted.pop_front();
            }
            if (posted.empty()) fail("completion for a WR not posted (more completions than WRs)");
            const Posted& p = posted.front();
            if (wc.status == WcStatus::Success) {
                if (!p.signaled) fail("successful completion of an unsignaled WR");
                if (wc.opcode != wc_opcode(p.op)) fail("completion opcode does not match the WR's");
                if ((p.op == WrOpcode::RdmaRead || p.op == WrOpcode::AtomicCmpAndSwp ||
                     p.op == WrOpcode::AtomicFetchAndAdd) &&
                    wc.byte_len > p.len)
                    fail("completion byte_len beyond the WR's SGEs");
            }
            posted.pop_front();
        });
        fuzz::drain_cq(*eng, rcq, [](const Wc&) {});
    }

    void pump() {
        fuzz::drain_tx(*eng, bufs, now, fx, [&](TxFrame& f) {
            wire::RocePacket p;
            if (f.ext) return;
            if (wire::parse_roce(std::span<const uint8_t>(f.buf.data(), f.len), p) != wire::ParseError::Ok)
                fail("the engine sent a frame that does not parse");
            if (!(p.info().flags & wire::kOpRequest)) return;
            const uint32_t psn = p.bth.psn.value();
            if (kTrace) std::fprintf(stderr, "tx opcode 0x%02x psn 0x%06x\n", p.bth.opcode, psn);
            if (((psn - hi_psn) & 0xFFFFFF) < 0x800000) hi_psn = psn;
            // A request not seen before (a retransmission repeats a PSN below next_req_psn).
            if (!wire_reqs.empty() && Psn::diff(Psn{psn}, Psn{next_req_psn}) < 0) return;
            const bool read = p.bth.opcode == wire::op::READ_REQUEST;
            const bool atomic = p.bth.opcode == wire::op::COMPARE_SWAP || p.bth.opcode == wire::op::FETCH_ADD;
            const uint32_t len = read ? p.reth.dma_len : 0;
            wire_reqs.push_back(WireReq{psn, read, atomic, len});
            next_req_psn = (psn + (read && len > 1024 ? (len + 1023) / 1024 : 1)) & 0xFFFFFF;
        });
        fx.clear();
    }

    void post(Input& in) {
        const uint8_t k = in.u8();
        SendWr wr;
        wr.wr_id = next_wr_id++;
        const bool signaled = (k & 0x80) == 0 || k & 0x40;
        wr.send_flags = signaled ? kSendSignaled : 0;
        static constexpr WrOpcode kOps[] = {WrOpcode::Send,    WrOpcode::SendWithImm,     WrOpcode::RdmaWrite,
                                            WrOpcode::RdmaWriteWithImm, WrOpcode::RdmaRead, WrOpcode::RdmaRead,
                                            WrOpcode::AtomicCmpAndSwp, WrOpcode::AtomicFetchAndAdd};
        wr.opcode = kOps[k & 7];
        wr.imm_data = 0xC0FFEE00u | k;
        wr.remote_addr = 0x100000 + in.u16();
        wr.rkey = 0x1234;
        const bool atomic = wr.opcode == WrOpcode::AtomicCmpAndSwp || wr.opcode == WrOpcode::AtomicFetchAndAdd;
        const bool read = wr.opcode == WrOpcode::RdmaRead;
        uint32_t total = 0;
        if (atomic) {
            wr.remote_addr &= ~uint64_t{7};
            wr.compare_add = in.u64();
            wr.swap = 0x1111222233334444ull;
            const size_t off = (in.u16() % (kMemLen / 8)) * 8;
            wr.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(mem.data() + off), 8, mr.lkey});
            total = 8;
        } else {
            const uint8_t nsge = (k >> 3) & 3;  // 0..3 SGEs
            for (uint8_t s = 0; s < nsge; ++s) {
                const uint32_t len = in.u8() % 2 ? in.u16() % 2500 : in.u8();
                if (read) {
                    const size_t off = in.u16() % kMemLen;
                    const uint32_t l = static_cast<uint32_t>(std::min<size_t>(len, kMemLen - off));
                    wr.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(mem.data() + off), l, mr.lkey});
                    total += l;
                } else {
                    const size_t off = in.u16() % kSrcLen;
                    const uint32_t l = static_cast<uint32_t>(std::min<size_t>(len, kSrcLen - off));
                    wr.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(src.data() + off), l, src_mr.lkey});
                    total += l;
                }
            }
        }
        if (eng->post_send(qpn, std::span<const SendWr>(&wr, 1), fx).err) return;
        if (kTrace)
            std::fprintf(stderr, "post wr_id %lu op %d signaled %d len %u\n", static_cast<unsigned long>(wr.wr_id),
                         static_cast<int>(wr.opcode), signaled, total);
        posted.push_back(Posted{wr.wr_id, wr.opcode, signaled, total});
        if (read || atomic) {
            // Guard bytes are checked before a region becomes allowed (and at
            // the end of the input): as exact as a check after every step, since
            // an allowed region only ever grows, and cheaper.
            check_guards();
            for (const Sge& s : wr.sg_list) {
                allowed.emplace_back(reinterpret_cast<const uint8_t*>(s.addr) - mem.data(), s.length);
            }
        }
    }

    // A response from the peer to our QP, to be given its opcode and fields.
    wire::RocePacket response() const { return fuzz::from_peer(mac, local, peer, qpn); }

    // Encodes `p` with `pay` payload bytes of `fill` (correct ICRC and IPv4
    // checksum) and hands it to the engine, flat or, when `chain`, as an
    // mbuf chain split after the headers.
    void deliver(wire::RocePacket& p, uint32_t pay, uint8_t fill, bool chain, Input& in) {
        if ((p.info().flags & wire::kOpPayload) == 0) pay = 0;
        std::vector<uint8_t> payload(pay, fill);
        p.payload = payload.data();
        p.payload_len = pay;
        const size_t len = wire::encode_roce(p, rx);
        if (len == 0) return;
        const std::span<const uint8_t> frame(rx.data(), len);
        now += Nanos{100};
        if (kTrace)
            std::fprintf(stderr, "rx opcode 0x%02x psn 0x%06x syndrome 0x%02x msn %u pay %u\n", p.bth.opcode,
                         p.bth.psn.value(), p.aeth.syndrome, p.aeth.msn, pay);
        if (chain && len > 80) {
            const size_t cut = 70 + in.u8() % (len - 70);
            const std::span<const uint8_t> segs[2] = {frame.subspan(0, cut), frame.subspan(cut)};
            eng->on_frame_chain(segs, now, fx);
        } else {
            eng->on_frame(frame, now, fx);
        }
        if (p.bth.opcode != wire::op::READ_RESPONSE_MIDDLE && (p.aeth.syndrome & 0x60) == 0)
            lo_psn = p.bth.psn.value() + 1;
    }

    // A random response: any opcode a responder sends, PSN near the window.
    void respond(Input& in) {
        const uint8_t k = in.u8();
        wire::RocePacket p = response();
        // PSN: near the lowest or the highest the QP sent, or anywhere.
        const uint8_t ps = in.u8();
        const int32_t delta = static_cast<int8_t>(in.u8()) / 8;
        uint32_t psn = (ps & 3) == 3 ? in.u32() : (ps & 1 ? hi_psn : lo_psn) + static_cast<uint32_t>(delta);
        p.bth.psn = Psn{psn & 0xFFFFFF};
        p.aeth.msn = (ps & 0x80) ? in.u32() & 0xFFFFFF : static_cast<uint32_t>(next_wr_id + in.u8() % 8 - 4) & 0xFFFFFF;
        uint32_t pay = 0;
        switch (k % 12) {
            case 0:
            case 1:  // ACK, credit count in the low bits
                p.bth.opcode = wire::op::ACKNOWLEDGE;
                p.aeth.syndrome = wire::aeth::kAck | (in.u8() & 0x1F);
                break;
            case 2:  // RNR NAK with a timer code
                p.bth.opcode = wire::op::ACKNOWLEDGE;
                p.aeth.syndrome = wire::aeth::kRnrNak | (in.u8() & 0x1F);
                break;
            case 3:  // NAK: PSN sequence error, invalid request, remote access, remote op, invalid RD, reserved
                p.bth.opcode = wire::op::ACKNOWLEDGE;
                p.aeth.syndrome = wire::aeth::kNak | (in.u8() % 8);
                break;
            case 4:  // any syndrome, reserved classes included
                p.bth.opcode = wire::op::ACKNOWLEDGE;
                p.aeth.syndrome = in.u8();
                break;
            case 5:
                p.bth.opcode = wire::op::READ_RESPONSE_FIRST;
                pay = 1024;
                break;
            case 6:
                p.bth.opcode = wire::op::READ_RESPONSE_MIDDLE;
                pay = 1024;
                break;
            case 7:
                p.bth.opcode = wire::op::READ_RESPONSE_LAST;
                pay = in.u16() % 1025;
                break;
            case 8:
            case 9:
                p.bth.opcode = wire::op::READ_RESPONSE_ONLY;
                pay = in.u16() % 1025;
                break;
            case 10:
                p.bth.opcode = wire::op::ATOMIC_ACKNOWLEDGE;
                p.atomic_ack = in.u64();
                break;
            default:  // a READ response of any length, MTU or not
                p.bth.opcode = wire::op::READ_RESPONSE_FIRST + in.u8() % 4;
                pay = in.u16() % 4200;
                break;
        }
        deliver(p, pay, static_cast<uint8_t>(0x30 + (k >> 4)), k & 0x20, in);
        pump();
    }

    // The right response to the oldest request on the wire not answered yet:
    // an ACK, an ATOMIC ACKNOWLEDGE, or the READ RESPONSE packets (with bit 7,
    // only the first few of them: a gap).
    void answer(Input& in) {
        if (wire_reqs.empty()) return;
        const uint8_t k = in.u8();
        const WireReq r = wire_reqs.front();
        wire_reqs.pop_front();
        wire::RocePacket p = response();
        p.aeth.syndrome = wire::aeth::kAck | (k & 0x1F);
        p.aeth.msn = ++msn & 0xFFFFFF;
        p.bth.psn = Psn{r.psn};
        if (r.read) {
            const uint32_t n = r.read_len ? (r.read_len + 1023) / 1024 : 1;
            const uint32_t sent = k & 0x80 ? 1 + in.u8() % n : n;
            for (uint32_t i = 0; i < sent; ++i) {
                p.bth.psn = Psn{r.psn + i};
                p.bth.opcode = n == 1       ? wire::op::READ_RESPONSE_ONLY
                               : i == 0     ? wire::op::READ_RESPONSE_FIRST
                               : i == n - 1 ? wire::op::READ_RESPONSE_LAST
                                            : wire::op::READ_RESPONSE_MIDDLE;
                const uint32_t pay = i == n - 1 ? r.read_len - 1024 * (n - 1) : 1024;
                deliver(p, pay, static_cast<uint8_t>(0x40 + i), k & 0x20, in);
            }
        } else if (r.atomic) {
            p.bth.opcode = wire::op::ATOMIC_ACKNOWLEDGE;
            p.atomic_ack = in.u64();
            deliver(p, 0, 0, false, in);
        } else {
            p.bth.opcode = wire::op::ACKNOWLEDGE;
            deliver(p, 0, 0, false, in);
        }
        pump();
    }

    void tick(Input& in) {
        const uint8_t k = in.u8();
        const Nanos t = eng->next_timer();
        if (k & 1 && t != Nanos::max() && t > now)
            now = t;
        else
            now += Nanos{static_cast<int64_t>(k) * 1000};
        if (kTrace) std::fprintf(stderr, "timer at %ld ns\n", static_cast<long>(now.v));
        eng->on_timer(now, fx);
        pump();
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Target t;  // fresh per input: the invariants track everything posted
    // Work outstanding before the first response: a 2 KiB SEND, a 3 KiB
    // READ, a FETCH_ADD and a WRITE with immediate (post()'s encoding).
    static const uint8_t kInitial[] = {0x08, 0, 0, 1, 0x00, 0x08, 0, 0,                 // SEND
                                       0x0C, 0, 0, 1, 0x00, 0x0C, 0x00, 0x10,           // READ
                                       0x07, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0,     // FETCH_ADD
                                       0x0B, 0, 0, 0, 200, 0x00, 0x01};                 // WRITE_IMM
    Input init{kInitial, sizeof kInitial};
    while (!init.empty()) t.post(init);
    Input in{data, size};
    t.pump();
    for (int steps = 0; !in.empty() && steps < 256; ++steps) {
        switch (in.u8() % 8) {
            case 0:
            case 1:
                t.respond(in);
                break;
            case 2:
            case 3:
                t.answer(in);
                break;
            case 4:
            case 5:
                t.tick(in);
                break;
            case 6:
                t.post(in);
                t.pump();
                break;
            default:
                t.pump();
                break;
        }
        t.poll();
        if (t.in_error()) {
            t.poll();
            if (!t.posted.empty()) fail("the QP is in error but posted WRs have not all completed");
            break;
        }
    }
    t.check_guards();
    return 0;
}
