// libFuzzer target: an RC responder against a model of the right answer.
// One engine per input (path MTU 256, 1024 or 4096; READ responses copied or
// lent zero-copy), an RC (or UC, or spraying RC) QP in RTS whose receive
// PSN starts just below 2^24 so the stream wraps. The input is a script of
// well-formed requester behaviour, a few bytes per step:
//   msg:    a new message at the expected PSN: SEND / SEND with immediate
//           (into posted RECVs of 1-3 SGEs), WRITE / WRITE with immediate,
//           READ or CMP_SWAP / FETCH_ADD, inside the MR, 1-8 packets, AckReq
//           on the last and on others as the input says;
//   resend: the last message's packets again from the expected PSN on (what
//           a requester does after an RNR or sequence NAK);
//   (a message may go as two-segment chains, headers whole in the first
//   segment, the cut anywhere in payload, pad or ICRC, for all that follows);
//   dup:    one packet delivered before, again (a duplicate);
//   ahead:  a SEND/WRITE ONLY with a PSN past the expected one (a loss);
//   recv:   a RECV posted;
//   garbage: at the expected PSN, a WRITE_MIDDLE or SEND_LAST with no
//           message open, a SEND_FIRST inside one, a packet over the MTU:
//           protocol errors the model knows.
// The model (rxe's responder as REFERENCE.md and dataplane/transport/README
// describe it) computes for every packet what the responder answers and does:
//   - in order: SEND scatters its payload into the oldest RECV and completes
//     it on its last packet (byte_len, immediate); WRITE places its payload
//     at the RETH VA, WRITE with immediate completes a RECV; READ answers
//     with FIRST/MIDDLE/LAST or ONLY responses carrying the MR's bytes;
//     atomics answer the original value and update the MR; an AckReq SEND/
//     WRITE packet is ACKed (PSN, MSN) at once (no coalescing); no RECV for
//     a SEND's first packet (or a WRITE with immediate's last): RNR NAK with
//     the QP's timer, PSN not advanced;
//   - a PSN ahead: one PSN sequence error NAK naming the expected PSN, then
//     nothing until an in-order packet executes;
//   - a duplicate SEND/WRITE: ACK of the last PSN executed with the current
//     MSN; a duplicate READ/atomic still among the saved results: its
//     responses again (READ: the MR's bytes now; atomic: the saved value);
//     otherwise dropped (resource missing);
//   - a SEND longer than its RECV, an opcode out of sequence: NAK invalid
//     request, the RECV completed in error, the QP in error and every RECV
//     flushed.
// Checked after every packet: the frames sent equal the model's, one for
// one (opcode, PSN, AETH syndrome and MSN, READ payload, atomic value);
// completions equal the model's; the MR and the receive buffers equal the
// model's memory; duplicate/out-of-sequence counters equal the model's.
// With config bit 3 the QP sprays (reorder window 16): a message that will
// neither wait for a RECV nor fail arrives in the order the input says and
// must end as the in-order model does (MR, RECV buffers, completions,
// expected PSN); after an RNR NAK the message is resent and its held
// packets drain. Its frames (ACKs merge) are only parsed; PSN-ahead
// packets and protocol errors on top of held packets are left out (they
// are held, not NAKed: fuzz_qp_kinds covers them).
// With config bit 4 the QP is UC (READ and atomics become SEND/WRITE): the
// model is rxe's UC responder - a packet with another PSN than the expected
// one, or a FIRST inside a message, ends the message in progress (its RECV
// kept) and restarts at that PSN; a continuation with no message open is a
// uc_sequence drop, what RC would NAK a uc_invalid drop, a SEND without a
// RECV a no_recv drop, each ending the message; nothing is ever sent. Those
// drop counters, memory, completions and the expected PSN equal the model's.
// With config bit 5 the RECVs come from an SRQ (not flushed when the QP
// enters error; the RECV in use is).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "tests/fuzz/common/engine_io.hpp"
#include "tests/fuzz/common/fuzz_input.hpp"
#include "tests/fuzz/common/rc_qp.hpp"

#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"

using namespace rocemu;
using namespace rocemu::transport;
using fuzz::Input;
namespace op = wire::op;
namespace aeth = wire::aeth;

namespace {

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_rc_model", what); }
const bool kTrace = std::getenv("ROCEMU_FUZZ_TRACE") != nullptr;

constexpr size_t kMrLen = 1 << 15;
constexpr size_t kRecvLen = 1 << 14;
constexpr uint32_t kMaxPkts = 8;
constexpr uint8_t kRnrTimer = 7;
constexpr uint32_t kRdAtomic = 4;

// A frame the responder should send.
struct Out {
    uint8_t opcode;
    Psn psn;
    uint8_t syndrome = 0;
    uint32_t msn = 0;
    uint64_t atomic = 0;
    std::vector<uint8_t> payload;
};

struct Recv {
    uint64_t wr_id;
    SgeList sges;
    uint64_t len = 0;
};

struct Resource {
    bool read = false, used = false;
    Psn first, last;
    uint64_t orig = 0;
};

struct Model {
    uint32_t mtu = 1024;
    Psn epsn;
    uint32_t msn = 0;
    bool nak_sent = false;
    bool in_msg = false;
    uint8_t msg_op = 0;
    bool has_wqe = false;
    Recv wqe;
    uint64_t offset = 0;
    uint64_t write_va = 0;  // offset into mr
    uint32_t write_len = 0;
    bool error = false;
    std::deque<Recv> rq;
    Resource res[kRdAtomic];
    uint32_t res_next = 0;
    uint64_t dup = 0, ooo = 0, resource_missing = 0;
    uint64_t uc_sequence = 0, uc_invalid = 0, no_recv = 0;  // UC drops
    std::vector<uint8_t> mr = std::vector<uint8_t>(kMrLen);
    std::vector<uint8_t> recv = std::vector<uint8_t>(kRecvLen);
    std::deque<Out> out;
    std::deque<Wc> wcs;
};

enum class K : uint8_t { Send, Write, Read, Atomic };

K kind(uint8_t opcode) {
    const uint32_t f = wire::opcode_info(opcode).flags;
    return f & wire::kOpSend ? K::Send : f & wire::kOpWrite ? K::Write : f & wire::kOpRead ? K::Read : K::Atomic;
}

struct Sent {
    wire::RocePacket p;  // payload points into pay
    std::vector<uint8_t> pay;
};

struct Target {
    std::unique_ptr<Engine> eng;
    Qpn qpn;
    PdHandle pd;
    CqHandle scq, rcq;
    MrHandle mr, recv_mr;
    std::vector<uint8_t> mem = std::vector<uint8_t>(kMrLen);
    std::vector<uint8_t> recv = std::vector<uint8_t>(kRecvLen);
    std::vector<std::vector<uint8_t>>& bufs = fuzz::tx_buffers();
    std::vector<uint8_t> frame = std::vector<uint8_t>(9216 + 64);
    Model m;
    bool spray = false;  // the QP sprays: its responder has a reorder buffer
    bool uc = false;     // the QP is UC: no ACKs, errors and gaps are drops
    bool use_srq = false;  // RECVs come from a shared receive queue
    SrqHandle srq;
    uint16_t chain = 0;  // non-zero: frames go as two-segment chains cut after byte pay_off + chain % ...
    std::deque<Sent> history;  // the last packets delivered
    std::vector<Sent> last_msg;
    uint64_t next_wr_id = 1;
    Nanos now{0};
    Effects fx;
    wire::MacAddr mac{{2, 0, 0, 0, 0, 2}};
    wire::IpAddr local = wire::IpAddr::from_v4(0x0A000002);
    wire::IpAddr peer = wire::IpAddr::from_v4(0x0A000001);

    explicit Target(uint8_t cfg) {
        EngineConfig c;
        c.mac = mac;
        c.gids = {local};
        c.max_qp = 1;
        c.max_mr = 2;
        c.max_cq = 2;
        c.max_srq = 1;
        c.max_ah = 1;
        c.zero_copy_min = cfg & 1 ? 512 : 0;
        uc = cfg & 0x10;
        use_srq = cfg & 0x20;
        spray = (cfg & 8) && !uc;
        VerbsError e;
        eng = Engine::create(c, e);
        if (!eng) fail("engine config");
        // A pattern that differs along the MR (memcpy: a byte loop took a fifth of a run).
        for (size_t i = 0; i < kMrLen; i += 8192) fuzz::fill_pattern(mem.data() + i, 8192, static_cast<uint8_t>(i >> 13));
        m.mr = mem;
        pd = eng->alloc_pd().value;
        scq = eng->create_cq(16).value;
        rcq = eng->create_cq(256).value;
        mr = eng->reg_mr(pd, mem.data(), mem.size(), kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic).value;
        recv_mr = eng->reg_mr(pd, recv.data(), recv.size(), kLocalWrite).value;
        QpInitAttr ia;
        ia.pd = pd;
        ia.send_cq = scq;
        ia.recv_cq = rcq;
        ia.cap.max_recv_wr = 64;
        ia.cap.max_send_wr = 1;  // nothing is sent: a small send queue is a cheaper engine per input
        ia.cap.max_inline_data = 0;
        if (spray) {
            ia.reliability = Reliability::Spray;
            ia.reorder_window = 16;  // >= kMaxPkts: a whole message fits
        }
        if (uc) ia.qp_type = QpType::Uc;
        if (use_srq) ia.srq = srq = eng->create_srq(pd, 64, 4).value;
        qpn = eng->create_qp(ia).value;
        static constexpr PathMtu kMtus[] = {PathMtu::Mtu1024, PathMtu::Mtu256, PathMtu::Mtu4096, PathMtu::Mtu1024};
        const PathMtu mtu = kMtus[(cfg >> 1) & 3];
        m.mtu = mtu_bytes(mtu);
        m.epsn = Psn{0xFFFFFCu + (cfg >> 6)};
        // INIT, then RTR with our receive PSN, MTU and RNR timer, then RTS.
        QpAttr a;
        a.qp_state = QpState::Init;
        a.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
        if (eng->modify_qp(qpn, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, fx).err) fail("INIT");
        a.qp_state = QpState::Rtr;
        a.path_mtu = mtu;
        a.dest_qp_num = Qpn{0x11};
        a.rq_psn = m.epsn;
        a.max_dest_rd_atomic = kRdAtomic;
        a.min_rnr_timer = kRnrTimer;
        a.ah_attr.dgid = peer;
        const uint32_t rtr = kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn;
        if (eng->modify_qp(qpn, a, uc ? rtr : rtr | kAttrMaxDestRdAtomic | kAttrMinRnrTimer, fx).err) fail("RTR");
        a.qp_state = QpState::Rts;
        const uint32_t rts = kAttrState | kAttrSqPsn;
        if (eng->modify_qp(qpn, a, uc ? rts : rts | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic, fx)
                .err)
            fail("RTS");
    }

    // ---- the model ----

    void expect(uint8_t opcode, Psn psn, uint8_t syndrome, uint32_t msn) { m.out.push_back(Out{opcode, psn, syndrome, msn, 0, {}}); }

    void complete(uint64_t wr_id, WcStatus st, WcOpcode opc, uint32_t len, uint32_t imm, uint32_t flags) {
        Wc wc;
        wc.wr_id = wr_id;
        wc.status = st;
        wc.opcode = opc;
        wc.byte_len = len;
        wc.imm_data = imm;
        wc.wc_flags = flags;
        wc.qp_num = qpn;
        m.wcs.push_back(wc);
    }

    // A fatal NAK: the RECV in use completes with `recv_st` (unless
    // Success), the NAK is sent, the QP enters error and flushes its RECVs.
    void model_fatal(uint8_t syndrome, Psn psn, WcStatus recv_st) {
        if (m.has_wqe && recv_st != WcStatus::Success) {
            complete(m.wqe.wr_id, recv_st, WcOpcode::Recv, 0, 0, 0);
            m.has_wqe = false;
        }
        m.out.clear();  // entering error drops what is still queued (nothing: we pump after every packet)
        if (m.has_wqe) complete(m.wqe.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0, 0, 0);
        if (!use_srq) {  // an SRQ keeps its RECVs for the other QPs
            for (const Recv& r : m.rq) complete(r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0, 0, 0);
            m.rq.clear();
        }
        m.has_wqe = false;
        m.in_msg = false;
        m.error = true;
        expect(op::ACKNOWLEDGE, psn, syndrome, m.msn);
    }

    void model_scatter(const Recv& w, uint64_t off, const uint8_t* src, uint32_t len) {
        for (const Sge& s : w.sges) {
            if (!len) break;
            if (off >= s.length) {
                off -= s.length;
                continue;
            }
            const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(s.length - off, len));
            std::memcpy(m.recv.data() + (reinterpret_cast<uint8_t*>(s.addr) - recv.data()) + off, src, n);
            src += n;
            len -= n;
            off = 0;
        }
    }

    uint64_t mr_off(uint64_t va) const { return va - reinterpret_cast<uint64_t>(mem.data()); }

    void expect_read(Psn psn, uint64_t va, uint32_t len) {
        const uint32_t n = len == 0 ? 1 : (len + m.mtu - 1) / m.mtu;
        for (uint32_t i = 0; i < n; ++i) {
            const uint8_t opc = n == 1 ? op::READ_RESPONSE_ONLY
                                : i == 0 ? op::READ_RESPONSE_FIRST
                                : i == n - 1 ? op::READ_RESPONSE_LAST
                                             : op::READ_RESPONSE_MIDDLE;
            const uint32_t pay = std::min(m.mtu, len - i * m.mtu);
            Out o{opc, psn + i, aeth::kCreditInvalid, m.msn, 0, {}};
            const uint8_t* src = m.mr.data() + mr_off(va) + size_t{i} * m.mtu;
            if (len) o.payload.assign(src, src + pay);
            m.out.push_back(std::move(o));
        }
    }

    void model_duplicate(const wire::RocePacket& p) {
        ++m.dup;
        const K k = kind(p.bth.opcode);
        if (k == K::Send || k == K::Write) {
            expect(op::ACKNOWLEDGE, m.epsn - 1, aeth::kCreditInvalid, m.msn);
            return;
        }
        for (const Resource& r : m.res) {
            if (!r.used) continue;
            if (k == K::Atomic && !r.read && r.first == p.bth.psn) {
                m.out.push_back(Out{op::ATOMIC_ACKNOWLEDGE, p.bth.psn, aeth::kCreditInvalid, m.msn, r.orig, {}});
                return;
            }
            if (k == K::Read && r.read && Psn::diff(p.bth.psn, r.first) >= 0 && Psn::diff(p.bth.psn, r.last) <= 0) {
                const uint32_t len = p.reth.dma_len;
                const uint32_t n = len == 0 ? 1 : (len + m.mtu - 1) / m.mtu;
                if (p.bth.psn + (n - 1) != r.last) break;
                expect_read(p.bth.psn, p.reth.va, len);
                return;
            }
        }
        ++m.resource_missing;
    }

    // What the responder does with one well-formed request.
    // UC (rxe's UC responder): a packet with another PSN than the expected
    // one, or a FIRST inside a message, ends the message in progress (its
    // RECV is kept) and restarts at that PSN; a continuation with no message
    // open is dropped; what RC would NAK (length, opcode sequence) and a
    // SEND with no RECV are dropped, and the message ends. Nothing is sent.
    void model_uc(const wire::RocePacket& p) {
        const bool first = p.info().flags & wire::kOpFirst;
        const K k = kind(p.bth.opcode);
        if (p.bth.psn != m.epsn || (m.in_msg && first)) {
            m.in_msg = false;
            m.epsn = p.bth.psn;
        }
        auto drop = [&](uint64_t& counter) {
            ++counter;
            m.in_msg = false;
            m.epsn = p.bth.psn + 1;
        };
        if (!m.in_msg && !first) return drop(m.uc_sequence);
        if (m.in_msg && k != kind(m.msg_op)) return drop(m.uc_invalid);
        WcStatus st;
        switch (exec_send_write(p, st)) {
            case Res::Done: return;
            case Res::NoRecv: return drop(m.no_recv);
            case Res::Invalid: return drop(m.uc_invalid);
        }
    }

    enum class Res : uint8_t { Done, NoRecv, Invalid };
    // A SEND or WRITE packet at the expected PSN that continues (or starts)
    // the message in progress, on RC and UC alike: places its payload, takes
    // and completes RECVs, advances the PSN. NoRecv: no RECV for it;
    // Invalid: a length or offset is wrong, `st` the status the RECV in use
    // completes with on RC. Neither changes the message in progress.
    Res exec_send_write(const wire::RocePacket& p, WcStatus& st) {
        const uint32_t f = p.info().flags;
        const bool first = f & wire::kOpFirst, last = f & wire::kOpLast;
        const uint32_t len = p.payload_len;
        st = WcStatus::LocLenErr;
        if ((f & wire::kOpPayload) && (len > m.mtu || (!last && len != m.mtu))) return Res::Invalid;
        auto take_recv = [&] {
            if (m.has_wqe) return true;
            if (m.rq.empty()) return false;
            m.wqe = m.rq.front();
            m.rq.pop_front();
            m.has_wqe = true;
            return true;
        };
        if (kind(p.bth.opcode) == K::Send) {
            if (first) {
                if (!take_recv()) return Res::NoRecv;
                m.offset = 0;
            }
            if (m.offset + len > m.wqe.len) return Res::Invalid;
            model_scatter(m.wqe, m.offset, p.payload, len);
            m.offset += len;
            if (last) {
                const bool imm = f & wire::kOpImm;
                complete(m.wqe.wr_id, WcStatus::Success, WcOpcode::Recv, static_cast<uint32_t>(m.offset),
                         imm ? p.imm : 0, imm ? kWcWithImm : 0);
                m.has_wqe = false;
            }
        } else {
            st = WcStatus::Success;
            if (first) {
                if (last ? len != p.reth.dma_len : p.reth.dma_len <= len) return Res::Invalid;
                m.write_va = mr_off(p.reth.va);
                m.write_len = p.reth.dma_len;
                m.offset = 0;
            }
            if (m.offset + len > m.write_len || (last && m.offset + len != m.write_len)) return Res::Invalid;
            if (last && (f & wire::kOpImm) && !take_recv()) return Res::NoRecv;
            if (len) std::memcpy(m.mr.data() + m.write_va + m.offset, p.payload, len);
            m.offset += len;
            if (last && (f & wire::kOpImm)) {
                complete(m.wqe.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, m.write_len, p.imm, kWcWithImm);
                m.has_wqe = false;
            }
        }
        if (last) ++m.msn;
        m.in_msg = !last;
        if (first && !last) m.msg_op = p.bth.opcode;
        ++m.epsn;
        return Res::Done;
    }

    void model(const wire::RocePacket& p) {
        if (m.error) return;  // dropped (QP error)
        if (uc) return model_uc(p);
        const int32_t d = Psn::diff(p.bth.psn, m.epsn);
        if (d > 0) {
            ++m.ooo;
            if (!m.nak_sent) {
                m.nak_sent = true;
                expect(op::ACKNOWLEDGE, m.epsn, aeth::kNakPsnSeqError, m.msn);
            }
            return;
        }
        if (d < 0) return model_duplicate(p);
        m.nak_sent = false;
        const bool first = p.info().flags & wire::kOpFirst;
        const K k = kind(p.bth.opcode);
        if (m.in_msg ? first || k != kind(m.msg_op) : !first)
            return model_fatal(aeth::kNakInvalidRequest, p.bth.psn, m.in_msg ? WcStatus::LocQpOpErr : WcStatus::Success);
        auto rnr = [&] {
            m.nak_sent = true;
            expect(op::ACKNOWLEDGE, p.bth.psn, static_cast<uint8_t>(aeth::kRnrNak | kRnrTimer), m.msn);
        };
        if (k == K::Send || k == K::Write) {
            WcStatus st;
            switch (exec_send_write(p, st)) {
                case Res::Done: break;
                case Res::NoRecv: return rnr();
                case Res::Invalid: return model_fatal(aeth::kNakInvalidRequest, p.bth.psn, st);
            }
            if (p.bth.ackreq) expect(op::ACKNOWLEDGE, p.bth.psn, aeth::kCreditInvalid, m.msn);
            return;
        }
        if (k == K::Read) {
            const uint32_t n = p.reth.dma_len == 0 ? 1 : (p.reth.dma_len + m.mtu - 1) / m.mtu;
            ++m.msn;
            expect_read(p.bth.psn, p.reth.va, p.reth.dma_len);
            m.res[m.res_next++ % kRdAtomic] = Resource{true, true, p.bth.psn, p.bth.psn + (n - 1), 0};
            m.epsn += n;
            return;
        }
        uint64_t orig;  // an atomic
        uint8_t* at = m.mr.data() + mr_off(p.atomic.va);
        std::memcpy(&orig, at, 8);
        const uint64_t nv = p.bth.opcode == op::COMPARE_SWAP ? (orig == p.atomic.compare ? p.atomic.swap_add : orig)
                                                              : orig + p.atomic.swap_add;
        std::memcpy(at, &nv, 8);
        m.res[m.res_next++ % kRdAtomic] = Resource{false, true, p.bth.psn, p.bth.psn, orig};
        ++m.msn;
        m.out.push_back(Out{op::ATOMIC_ACKNOWLEDGE, p.bth.psn, aeth::kCreditInvalid, m.msn, orig, {}});
        ++m.epsn;
    }

    // ---- the engine ----

    void check_frames() {
        fuzz::drain_tx(*eng, bufs, now, fx, [&](TxFrame& f) {
            wire::RocePacket p;
            std::vector<uint8_t> whole(f.buf.data(), f.buf.data() + f.len);
            if (f.ext) {  // zero copy: headers, the MR's bytes, pad and ICRC
                if (f.ext < mem.data() || f.ext + f.ext_len > mem.data() + mem.size())
                    fail("a zero-copy frame lends bytes outside the MR");
                whole.insert(whole.end(), f.ext, f.ext + f.ext_len);
                whole.insert(whole.end(), f.tail, f.tail + f.tail_len);
            }
            if (wire::parse_roce(whole, p) != wire::ParseError::Ok) fail("the responder sent a frame that does not parse");
            if (f.pin) f.pin->fetch_sub(1, std::memory_order_release);
            if (kTrace)
                std::fprintf(stderr, "  tx op 0x%02x psn %06x syn 0x%02x msn %u pay %u\n", p.bth.opcode,
                             p.bth.psn.value(), p.aeth.syndrome, p.aeth.msn, p.payload_len);
            if (spray) return;  // ACKs merge and early packets wait: not compared one for one
            if (m.out.empty()) fail("the responder sent a frame the model does not");
            const Out o = std::move(m.out.front());
            m.out.pop_front();
            if (p.bth.opcode != o.opcode) fail("response opcode differs from the model's");
            if (p.bth.psn != o.psn) fail("response PSN differs from the model's");
            if (p.bth.dqpn != Qpn{0x11}) fail("response to the wrong QPN");
            if (p.info().has(wire::Hdr::Aeth) && (p.aeth.syndrome != o.syndrome || p.aeth.msn != o.msn))
                fail("response AETH (syndrome or MSN) differs from the model's");
            if (o.opcode == op::ATOMIC_ACKNOWLEDGE && p.atomic_ack != o.atomic)
                fail("atomic ACK value differs from the model's");
            if (p.payload_len != o.payload.size() ||
                (p.payload_len && std::memcmp(p.payload, o.payload.data(), p.payload_len) != 0))
                fail("READ response payload differs from the MR's bytes");
        });
        if (spray) m.out.clear();
        if (!m.out.empty()) fail("the responder did not send a frame the model does");
        fx.cq_events.clear();
        fx.cnp_received.clear();
    }

    void check_completions() {
        Wc wc[1];
        if (eng->poll_cq(scq, wc) > 0) fail("completion on the send CQ");
        fuzz::drain_cq(*eng, rcq, [&](const Wc& c) {
            if (kTrace)
                std::fprintf(stderr, "  wc wr_id %lu %s len %u\n", (unsigned long)c.wr_id, to_string(c.status),
                             c.byte_len);
            if (m.wcs.empty()) fail("a completion the model does not make");
            const Wc e = m.wcs.front();
            m.wcs.pop_front();
            if (c.wr_id != e.wr_id || c.status != e.status) fail("completion wr_id or status differs");
            if (e.status == WcStatus::Success &&
                (c.opcode != e.opcode || c.byte_len != e.byte_len || c.wc_flags != e.wc_flags ||
                 c.imm_data != e.imm_data || c.qp_num != qpn))
                fail("completion opcode, length, flags or immediate differ from the model's");
        });
        if (!m.wcs.empty()) fail("a completion the model makes is missing");
    }

    void check_state() {
        if (std::memcmp(mem.data(), m.mr.data(), kMrLen) != 0) fail("MR contents differ from the model's");
        if (std::memcmp(recv.data(), m.recv.data(), kRecvLen) != 0) fail("RECV buffers differ from the model's");
        const Counters& c = *eng->qp_counters(qpn);
        if (!spray && c.duplicate_request != m.dup) fail("duplicate_request differs from the model's");
        if (!spray && c.out_of_seq_request != m.ooo) fail("out_of_seq_request differs from the model's");
        if (!spray && c.drops[size_t(DropReason::ResourceMissing)] != m.resource_missing)
            fail("resource-missing drops differ from the model's");
        if (c.drops[size_t(DropReason::UcSequence)] != m.uc_sequence ||
            c.drops[size_t(DropReason::UcInvalid)] != m.uc_invalid ||
            (uc && c.drops[size_t(DropReason::NoRecvWqe)] != m.no_recv))
            fail("UC drops (sequence, invalid, no RECV) differ from the model's");
        QpAttr a;
        QpInitAttr ia;
        eng->query_qp(qpn, a, ia);
        if ((a.qp_state == QpState::Err) != m.error) fail("QP error state differs from the model's");
        if (!m.error && a.rq_psn != m.epsn) fail("expected PSN differs from the model's");
    }

    void deliver(const wire::RocePacket& p) {
        model(p);
        rx(p);
        check_frames();
        check_completions();
        check_state();
    }

    void rx(const wire::RocePacket& p) {
        const size_t len = wire::encode_roce(p, frame);
        if (!len) fail("encode");
        if (kTrace)
            std::fprintf(stderr, "rx op 0x%02x psn %06x len %u ackreq %d (epsn %06x)\n", p.bth.opcode,
                         p.bth.psn.value(), p.payload_len, p.bth.ackreq, m.epsn.value());
        now += Nanos{100};
        const std::span<const uint8_t> f(frame.data(), len);
        // As a two-segment chain (headers whole in the first), when the
        // message says so: the payload is checked and placed piece by piece.
        const size_t pay_off = len - wire::kIcrcLen - wire::roce_pad(p.payload_len) - p.payload_len;
        if (chain && len > pay_off + 1) {
            const size_t cut = pay_off + 1 + chain % (len - pay_off - 1);
            const std::span<const uint8_t> segs[2] = {f.subspan(0, cut), f.subspan(cut)};
            eng->on_frame_chain(segs, now, fx);
        } else {
            eng->on_frame(f, now, fx);
        }
    }

    void remember(const Sent& s) {
        history.push_back(s);
        history.back().p.payload = history.back().pay.data();
        if (history.size() > 24) history.pop_front();
    }

    wire::RocePacket request() const { return fuzz::from_peer(mac, local, peer, qpn); }
    uint8_t base() const { return uc ? op::kUc : op::kRc; }  // opcode class

    // ---- steps ----

    void post_recv(Input& in) {
        const uint8_t k = in.u8();
        RecvWr wr;
        wr.wr_id = next_wr_id++;
        Recv r;
        r.wr_id = wr.wr_id;
        for (uint32_t s = 0, n = 1 + k % 3; s < n; ++s) {
            const size_t off = in.u16() % kRecvLen;
            const uint32_t len = static_cast<uint32_t>(std::min<size_t>(k & 4 ? in.u16() % 9000 : in.u8() * 8u, kRecvLen - off));
            wr.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(recv.data() + off), len, recv_mr.lkey});
            r.len += len;
        }
        r.sges = wr.sg_list;
        if (use_srq) {
            if (eng->post_srq_recv(srq, std::span<const RecvWr>(&wr, 1)).err) return;
            m.rq.push_back(r);
            return;
        }
        if (eng->post_recv(qpn, std::span<const RecvWr>(&wr, 1), fx).err) return;
        if (m.error) {  // posted to a QP in error: flushed at once
            complete(r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0, 0, 0);
            check_completions();
            return;
        }
        m.rq.push_back(r);
    }

    void msg(Input& in) {
        // Spraying: the message an RNR NAK interrupted is resent, as a
        // requester must (its later packets wait in the reorder buffer).
        if (spray && unfinished()) return resend();
        const uint8_t k = in.u8();
        static constexpr uint8_t kFirst[] = {op::SEND_FIRST, op::SEND_FIRST, op::WRITE_FIRST, op::WRITE_FIRST,
                                             op::READ_REQUEST, op::COMPARE_SWAP, op::FETCH_ADD, op::SEND_FIRST};
        uint8_t first_op = kFirst[k & 7];
        if (uc && (first_op == op::READ_REQUEST || first_op == op::COMPARE_SWAP || first_op == op::FETCH_ADD))
            first_op = k & 0x40 ? op::WRITE_FIRST : op::SEND_FIRST;  // UC has neither
        const bool imm = k & 8;
        const K kd = kind(first_op);
        const uint32_t mtu = m.mtu;
        uint32_t total = in.u16() % (kMaxPkts * mtu + 1);
        if (k & 0x10) total %= mtu + 1;  // one packet, often
        const uint32_t npkts = kd == K::Read || kd == K::Atomic ? 1 : total == 0 ? 1 : (total + mtu - 1) / mtu;
        const uint64_t va = reinterpret_cast<uint64_t>(mem.data()) + in.u16() % (kMrLen - total + 1);
        const uint8_t ack_bits = in.u8();
        const uint8_t fill = in.u8();
        chain = k & 0x80 ? in.u16() : 0;
        last_msg.clear();
        wire::RocePacket p = request();
        p.imm = in.u32();
        if (kd == K::Atomic) {
            p.bth.opcode = first_op;
            p.atomic.va = reinterpret_cast<uint64_t>(mem.data()) + (in.u16() % (kMrLen / 8)) * 8;
            p.atomic.rkey = mr.rkey;
            p.atomic.swap_add = in.u64();
            // Compare with what is there, half the time, so swaps happen.
            p.atomic.compare = k & 0x20 ? in.u64() : load_mr(p.atomic.va);
            p.bth.psn = m.epsn;
            last_msg.push_back(Sent{p, {}});
        } else {
            for (uint32_t i = 0; i < npkts; ++i) {
                const bool f = i == 0, l = i == npkts - 1;
                uint8_t opc;
                if (kd == K::Read) opc = op::READ_REQUEST;
                else if (kd == K::Send)
                    opc = f && l ? (imm ? op::SEND_ONLY_IMM : op::SEND_ONLY) : f ? op::SEND_FIRST
                          : l    ? (imm ? op::SEND_LAST_IMM : op::SEND_LAST) : op::SEND_MIDDLE;
                else
                    opc = f && l ? (imm ? op::WRITE_ONLY_IMM : op::WRITE_ONLY) : f ? op::WRITE_FIRST
                          : l    ? (imm ? op::WRITE_LAST_IMM : op::WRITE_LAST) : op::WRITE_MIDDLE;
                wire::RocePacket q = p;
                q.bth.opcode = static_cast<uint8_t>(opc | base());
                q.bth.psn = m.epsn + i;
                q.bth.ackreq = l || (ack_bits >> (i & 7) & 1);
                q.reth = {va, mr.rkey, total};
                Sent s{q, {}};
                if (kd != K::Read) {
                    const uint32_t pay = l ? total - i * mtu : mtu;
                    s.pay.resize(pay);
                    fuzz::fill_pattern(s.pay.data(), pay, static_cast<uint8_t>(fill + i * 31));
                }
                last_msg.push_back(std::move(s));
            }
        }
        for (Sent& s : last_msg) {
            s.p.payload = s.pay.data();
            s.p.payload_len = static_cast<uint32_t>(s.pay.size());
        }
        // Spraying, a message that neither waits for a RECV nor fails goes
        // in any order the input says: the reorder buffer must make of it
        // what the in-order stream makes (MR, RECV buffers, completions,
        // expected PSN). Its frames (ACKs merged, early ones held) are only
        // parsed.
        const bool waits = (kd == K::Send && (m.has_wqe ? m.wqe.len : m.rq.empty() ? 0 : m.rq.front().len) < total) ||
                           (kd == K::Send && !m.has_wqe && m.rq.empty()) ||
                           (kd == K::Write && imm && !m.has_wqe && m.rq.empty());
        if (spray && last_msg.size() > 1 && !m.in_msg && !waits) {
            std::vector<uint32_t> order(last_msg.size());
            for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
            for (uint32_t i = 0; i + 1 < order.size(); ++i) std::swap(order[i], order[i + in.u8() % (order.size() - i)]);
            for (const Sent& s : last_msg) model(s.p);
            for (uint32_t i : order) {
                rx(last_msg[i].p);
                check_frames();
            }
            check_completions();
            check_state();
            for (const Sent& s : last_msg) remember(s);
            return;
        }
        for (Sent& s : last_msg) {
            deliver(s.p);
            remember(s);
            if (m.error) return;
        }
    }

    uint64_t load_mr(uint64_t va) const {
        uint64_t v;
        std::memcpy(&v, reinterpret_cast<const void*>(va), 8);
        return v;
    }

    void resend() {
        if (spray) {
            // The packets held since the NAK drain as soon as the first one
            // executes: compared with the model once all are in.
            std::vector<const Sent*> todo;
            for (Sent& s : last_msg) {
                s.p.payload = s.pay.data();
                if (Psn::diff(s.p.bth.psn, m.epsn) >= 0) todo.push_back(&s);
            }
            for (const Sent* s : todo) model(s->p);
            for (const Sent* s : todo) {
                rx(s->p);
                check_frames();
            }
            check_completions();
            check_state();
            return;
        }
        for (Sent& s : last_msg) {
            s.p.payload = s.pay.data();
            if (Psn::diff(s.p.bth.psn, m.epsn) < 0) continue;
            deliver(s.p);
            if (m.error) return;
        }
    }

    // Spraying: packets of the last message past the expected PSN may wait
    // in the reorder buffer (an RNR NAK stopped it).
    bool unfinished() const { return !last_msg.empty() && Psn::diff(last_msg.back().p.bth.psn, m.epsn) >= 0; }

    void dup(Input& in) {
        if (history.empty()) return;
        Sent& s = history[in.u8() % history.size()];
        s.p.payload = s.pay.data();
        // Spraying holds a packet ahead of the expected PSN: only true duplicates.
        if (spray && Psn::diff(s.p.bth.psn, m.epsn) >= 0) return;
        deliver(s.p);
    }

    void ahead(Input& in) {
        const uint8_t k = in.u8();
        if (spray) return;  // held in the reorder window, not NAKed: fuzz_qp_kinds covers it
        wire::RocePacket p = request();
        p.bth.opcode = static_cast<uint8_t>((k & 1 ? op::SEND_ONLY : op::WRITE_ONLY) | base());
        p.bth.psn = m.epsn + (1 + k % 64);
        p.bth.ackreq = true;
        std::vector<uint8_t> pay(k & 2 ? 8 : 0, 0xEE);
        p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, static_cast<uint32_t>(pay.size())};
        p.payload = pay.data();
        p.payload_len = static_cast<uint32_t>(pay.size());
        deliver(p);
    }

    // Protocol errors the model knows: a continuation with no message open,
    // a SEND_FIRST in the middle of a message, a packet longer than the MTU.
    void garbage(Input& in) {
        const uint8_t k = in.u8();
        if (spray && unfinished()) return;  // the held packets would continue what it starts
        wire::RocePacket p = request();
        static constexpr uint8_t kOps[] = {op::WRITE_MIDDLE, op::SEND_LAST, op::SEND_FIRST, op::WRITE_ONLY};
        p.bth.opcode = static_cast<uint8_t>(kOps[k & 3] | base());
        p.bth.psn = m.epsn;
        std::vector<uint8_t> pay(k & 4 ? m.mtu + 4 : m.mtu, 0x77);
        p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, static_cast<uint32_t>(pay.size())};
        p.payload = pay.data();
        p.payload_len = static_cast<uint32_t>(pay.size());
        deliver(p);
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in{data, size};
    Target t(in.u8());  // fresh per input; the first byte picks MTU, zero copy, RC/spraying/UC and start PSN
    for (int steps = 0; !in.empty() && steps < 64 && !t.m.error; ++steps) {
        switch (in.u8() % 12) {
            case 0:
            case 1:
            case 2:
            case 3: t.msg(in); break;
            case 4:
            case 5:
            case 6: t.post_recv(in); break;
            case 7: t.resend(); break;
            case 8: t.dup(in); break;
            case 9: t.ahead(in); break;
            case 10:
                if (in.u8() < 32) t.garbage(in);
                break;
            default: t.now += Nanos::from_ms(1); t.eng->on_timer(t.now, t.fx); t.check_frames(); break;
        }
    }
    if (t.m.error) {  // every RECV flushed, nothing else
        t.check_completions();
        t.check_state();
    }
    return 0;
}
