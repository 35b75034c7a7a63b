// libFuzzer target: the responder side of every QP kind the other transport
// targets leave out. One engine per input with four QPs in RTS:
//   UD   with its own receive queue (Q_Key checked, GRH written);
//   UC   on a shared receive queue (SRQ);
//   RC   (interop) on the same SRQ;
//   RC   spraying, reorder window 16, with its own receive queue.
// The input is a script, a few bytes per step:
//   message: a whole SEND/WRITE/READ/atomic message (1-6 packets, MTU-sized
//            but the last) to one QP at its expected PSN, its packets
//            delivered permuted, one maybe lost or repeated (the reorder
//            buffer), each maybe truncated, a byte overwritten (ICRC fixed
//            or not), or cut into a two-segment chain anywhere;
//   packet:  one request of any opcode (the QP's class or any) with PSN
//            near the expected one, R_Key of the MR, of a receive-only MR,
//            of an MR in another PD or anything, VA and length in or out,
//            Q_Key right or wrong, ECN-CE, bad P_Key, IPv6, wrong source;
//   raw:     input bytes as a frame;
//   recv:    RECVs (1-3 SGEs inside the receive MR) to the UD or spraying
//            QP's queue or to the SRQ;
//   timer:   time forward (to the next timer or a little), on_timer.
// After each step whatever the engine sends is pulled, the CQs polled.
// Invariants (abort on failure):
//   - every received frame moves at most one drop counter, and one that
//     does not parse, or fails its ICRC, is dropped with that reason; a
//     drop that names a QP is counted on that QP too;
//   - a RECV completion names a posted RECV not completed yet, of that QP's
//     queue (in posting order) or of the SRQ; a successful one reports at
//     most the RECV's length; nothing completes on the send CQ (no send
//     was posted); a QP with its own queue in error has flushed every RECV;
//   - host memory outside registered MRs, the MR of the other PD, and the
//     receive MR outside posted SGEs keep their guard bytes;
//   - UD model: a well-formed UD SEND to the UD QP is dropped as bad Q_Key
//     or no RECV, or completes the oldest RECV: LocLenErr when GRH + payload
//     do not fit, else byte_len = 40 + payload with the GRH and the payload
//     in the buffer;
//   - every frame the engine sends parses (zero-copy frames: headers and
//     lent bytes inside the MR).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "tests/fuzz/common/engine_io.hpp"
#include "tests/fuzz/common/fuzz_input.hpp"

#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"
#include "dataplane/wire/wire.hpp"

using namespace rocemu;
using namespace rocemu::transport;
using fuzz::Input;

namespace {

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_qp_kinds", what); }
const bool kTrace = std::getenv("ROCEMU_FUZZ_TRACE") != nullptr;

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kRecvLen = 1 << 14;  // receive MR (local write only)
constexpr size_t kRdmaLen = 1 << 14;  // remote-access MR, between two unregistered guard areas
constexpr size_t kOtherLen = 1 << 12; // remote-access MR of another PD
constexpr uint32_t kMtu = 1024;
constexpr uint32_t kQkey = 0x11223344;
enum QpIdx { kUd, kUc, kRc, kSpray, kNumQps };

struct Recv {
    uint64_t wr_id;
    uint64_t len;
    SgeList sges;
};

struct Target {
    std::unique_ptr<Engine> eng;
    PdHandle pd, pd2;
    CqHandle scq, rcq;
    SrqHandle srq;
    MrHandle recv_mr, rdma_mr, other_mr;
    Qpn qpn[kNumQps];
    std::deque<Recv> rq[kNumQps];  // own receive queues (UD, spray)
    std::vector<Recv> srq_posted;   // SRQ: RECVs not completed yet, any order
    std::vector<uint8_t> recv = std::vector<uint8_t>(kRecvLen, kGuard);
    std::vector<uint8_t> rdma = std::vector<uint8_t>(3 * kRdmaLen, kGuard);  // middle third registered
    std::vector<uint8_t> other = std::vector<uint8_t>(kOtherLen, kGuard);
    std::vector<std::pair<size_t, size_t>> allowed;  // recv: offset, length of every SGE posted
    std::vector<uint8_t> scratch;
    const std::vector<uint8_t> guard_image = std::vector<uint8_t>(kRecvLen, kGuard);  // >= every guarded area
    std::vector<std::vector<uint8_t>>& bufs = fuzz::tx_buffers();
    std::vector<uint8_t> frame = std::vector<uint8_t>(9216 + 64);
    std::vector<uint8_t> payload = std::vector<uint8_t>(8192);
    uint64_t next_wr_id = 1;
    Nanos now{0};
    Effects fx;
    wire::MacAddr mac{{2, 0, 0, 0, 0, 2}};
    wire::IpAddr local = wire::IpAddr::from_v4(0x0A000002);
    wire::IpAddr local6 = wire::IpAddr::from_v4(0x0A000002);  // set to an IPv6 GID below
    wire::IpAddr peer = wire::IpAddr::from_v4(0x0A000001);

    uint8_t* rdma_mr_base() { return rdma.data() + kRdmaLen; }

    Target() {
        local6.b = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 2};
        EngineConfig c;
        c.mac = mac;
        c.gids = {local, local6};
        c.max_qp = 4;
        c.max_mr = 4;
        c.max_cq = 2;
        c.max_srq = 1;
        c.max_ah = 1;
        c.sack_delay = Nanos{5000};
        VerbsError e;
        eng = Engine::create(c, e);
        if (!eng) fail("engine config");
        pd = eng->alloc_pd().value;
        pd2 = eng->alloc_pd().value;
        scq = eng->create_cq(64).value;
        rcq = eng->create_cq(256).value;  // polled after every step
        recv_mr = eng->reg_mr(pd, recv.data(), recv.size(), kLocalWrite).value;
        rdma_mr = eng->reg_mr(pd, rdma_mr_base(), kRdmaLen, kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic)
                      .value;
        other_mr = eng->reg_mr(pd2, other.data(), other.size(), kLocalWrite | kRemoteWrite | kRemoteRead).value;
        srq = eng->create_srq(pd, 64, 4).value;
        for (int q = 0; q < kNumQps; ++q) {
            QpInitAttr ia;
            ia.pd = pd;
            ia.send_cq = scq;
            ia.recv_cq = rcq;
            ia.cap.max_send_wr = 1;  // nothing is sent: a small send queue is a cheaper engine per input
            ia.cap.max_inline_data = 0;
            ia.cap.max_recv_wr = 32;
            ia.qp_type = q == kUd ? QpType::Ud : q == kUc ? QpType::Uc : QpType::Rc;
            if (q == kUc || q == kRc) ia.srq = srq;
            if (q == kSpray) {
                ia.reliability = Reliability::Spray;
                ia.reorder_window = 16;
            }
            const Result<Qpn> r = eng->create_qp(ia);
            if (!r.ok()) fail("create_qp");
            qpn[q] = r.value;
            if (!to_rts(q)) fail("QP setup");
        }
    }

    bool to_rts(int q) {
        QpAttr a;
        a.qp_state = QpState::Init;
        a.qkey = kQkey;
        a.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
        const uint32_t base = kAttrState | kAttrPkeyIndex | kAttrPort;
        if (eng->modify_qp(qpn[q], a, base | (q == kUd ? kAttrQkey : kAttrAccessFlags), fx).err) return false;
        a.qp_state = QpState::Rtr;
        a.path_mtu = PathMtu::Mtu1024;
        a.dest_qp_num = Qpn{0x99};
        a.rq_psn = Psn{q == kSpray ? 0xFFFFFAu : 0u};  // the spraying window wraps soon
        a.max_dest_rd_atomic = 4;
        a.ah_attr.dgid = peer;
        uint32_t m = kAttrState;
        if (q == kUc) m |= kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn;
        if (q == kRc || q == kSpray)
            m |= kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer;
        if (eng->modify_qp(qpn[q], a, m, fx).err) return false;
        a.qp_state = QpState::Rts;
        m = kAttrState | kAttrSqPsn;
        if (q == kRc || q == kSpray) m |= kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic;
        return eng->modify_qp(qpn[q], a, m, fx).err == 0;
    }

    QpAttr query(int q) const {
        QpAttr a;
        QpInitAttr ia;
        eng->query_qp(qpn[q], a, ia);
        return a;
    }

    // ---- receives ----

    void post_recv(Input& in) {
        const uint8_t k = in.u8();
        const int where = k % 3;  // UD queue, spraying QP's queue, SRQ
        RecvWr wr;
        wr.wr_id = next_wr_id++;
        const uint32_t nsge = 1 + (k >> 2) % 3;
        uint64_t total = 0;
        for (uint32_t s = 0; s < nsge; ++s) {
            const size_t off = in.u16() % kRecvLen;
            const uint32_t want = k & 0x40 ? in.u16() % 4500 : 40 + in.u8() * 8;
            const uint32_t len = static_cast<uint32_t>(std::min<size_t>(want, kRecvLen - off));
            wr.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(recv.data() + off), len, recv_mr.lkey});
            total += len;
        }
        VerbsError e = where == 2   ? eng->post_srq_recv(srq, std::span<const RecvWr>(&wr, 1))
                       : where == 0 ? eng->post_recv(qpn[kUd], std::span<const RecvWr>(&wr, 1), fx)
                                    : eng->post_recv(qpn[kSpray], std::span<const RecvWr>(&wr, 1), fx);
        if (e.err) return;
        check_guards();  // before the region is allowed; see fuzz_requester
        for (const Sge& s : wr.sg_list) allowed.emplace_back(reinterpret_cast<uint8_t*>(s.addr) - recv.data(), s.length);
        const Recv r{wr.wr_id, total, wr.sg_list};
        if (where == 2) srq_posted.push_back(r);
        else rq[where == 0 ? kUd : kSpray].push_back(r);
        if (kTrace) std::fprintf(stderr, "recv wr_id %lu to %d len %lu\n", (unsigned long)wr.wr_id, where, (unsigned long)total);
    }

    // A RECV completion of QP q: posted, not completed yet, in order for an own queue.
    const Recv take_recv(int q, const Wc& wc) {
        if (q == kUc || q == kRc) {
            for (size_t i = 0; i < srq_posted.size(); ++i)
                if (srq_posted[i].wr_id == wc.wr_id) {
                    const Recv r = srq_posted[i];
                    srq_posted.erase(srq_posted.begin() + static_cast<ptrdiff_t>(i));
                    return r;
                }
            fail("RECV completion for a WR not posted to the SRQ (or completed twice)");
        }
        if (rq[q].empty() || rq[q].front().wr_id != wc.wr_id)
            fail("RECV completion out of posting order, or for a WR not posted to the QP");
        const Recv r = rq[q].front();
        rq[q].pop_front();
        return r;
    }

    int qp_index(Qpn n) const {
        for (int q = 0; q < kNumQps; ++q)
            if (qpn[q] == n) return q;
        return -1;
    }

    // UD model: the completion expected for the next well-formed UD SEND.
    struct UdExpect {
        bool armed = false;
        uint32_t payload_len = 0;
        const uint8_t* l3 = nullptr;
        bool v6 = false;
        const uint8_t* payload = nullptr;
    } ud_expect;
    bool ud_seen = false;

    void check_ud_completion(const Wc& wc, const Recv& r) {
        ud_seen = true;
        if (!ud_expect.armed) fail("UD completion without a well-formed UD SEND");
        const uint64_t need = uint64_t{ud_expect.payload_len} + 40;
        if (need > r.len) {
            if (wc.status != WcStatus::LocLenErr) fail("UD SEND longer than the RECV did not complete LocLenErr");
            return;
        }
        if (wc.status != WcStatus::Success) fail("UD SEND that fits the RECV did not complete successfully");
        if (wc.byte_len != need) fail("UD completion byte_len is not 40 + payload");
        if (!(wc.wc_flags & kWcGrh)) fail("UD completion without the GRH flag");
        // GRH and payload, gathered back from the SGEs (unless they overlap:
        // then a later piece overwrote an earlier one, on any device).
        for (size_t i = 0; i < r.sges.size(); ++i)
            for (size_t j = 0; j < i; ++j)
                if (r.sges[i].addr < r.sges[j].addr + r.sges[j].length &&
                    r.sges[j].addr < r.sges[i].addr + r.sges[i].length)
                    return;
        std::vector<uint8_t> got;
        for (const Sge& s : r.sges) got.insert(got.end(), reinterpret_cast<uint8_t*>(s.addr),
                                               reinterpret_cast<uint8_t*>(s.addr) + s.length);
        uint8_t grh[40] = {};
        if (ud_expect.v6) std::memcpy(grh, ud_expect.l3, 40);
        else std::memcpy(grh + 20, ud_expect.l3, 20);
        if (std::memcmp(got.data(), grh, 40) != 0) fail("UD RECV buffer does not start with the GRH");
        if (ud_expect.payload_len && std::memcmp(got.data() + 40, ud_expect.payload, ud_expect.payload_len) != 0)
            fail("UD RECV buffer does not hold the payload");
    }

    void poll() {
        Wc wc[1];
        if (eng->poll_cq(scq, wc) > 0) fail("completion on the send CQ, where nothing was posted");
        fuzz::drain_cq(*eng, rcq, [&](const Wc& c) {
            if (kTrace)
                std::fprintf(stderr, "  wc qp %x wr_id %lu status %s len %u\n", c.qp_num.v, (unsigned long)c.wr_id,
                             to_string(c.status), c.byte_len);
            const int q = qp_index(c.qp_num);
            if (q < 0) fail("RECV completion names no QP");
            const Recv r = take_recv(q, c);
            if (c.status == WcStatus::Success && c.opcode == WcOpcode::Recv && c.byte_len > r.len)
                fail("RECV completion reports more bytes than its SGEs hold");
            if (q == kUd) check_ud_completion(c, r);
        });
    }

    void check_guards() {
        scratch = recv;
        for (const auto& [off, len] : allowed) std::memset(scratch.data() + off, kGuard, len);
        // With memcmp, not byte loops: a loop under coverage instrumentation is slow.
        if (std::memcmp(scratch.data(), guard_image.data(), kRecvLen) != 0)
            fail("receive MR written outside every posted SGE");
        if (std::memcmp(rdma.data(), guard_image.data(), kRdmaLen) != 0 ||
            std::memcmp(rdma.data() + 2 * kRdmaLen, guard_image.data(), kRdmaLen) != 0)
            fail("memory outside every MR written");
        if (std::memcmp(other.data(), guard_image.data(), kOtherLen) != 0) fail("the MR of another PD was written");
    }

    void check_flushed() {
        for (int q : {kUd, kSpray})
            if (query(q).qp_state == QpState::Err && !rq[q].empty()) fail("a QP in error kept RECVs unflushed");
    }

    // ---- frames ----

    void pump() {
        fuzz::drain_tx(*eng, bufs, now, fx, [&](TxFrame& f) {
            if (f.ext) {
                if (f.ext < rdma_mr_base() || f.ext + f.ext_len > rdma_mr_base() + kRdmaLen)
                    fail("a zero-copy frame lends bytes outside the MR");
                if (f.pin) f.pin->fetch_sub(1, std::memory_order_release);
                return;
            }
            wire::RocePacket p;
            if (wire::parse_roce(std::span<const uint8_t>(f.buf.data(), f.len), p) != wire::ParseError::Ok)
                fail("the engine sent a frame that does not parse");
        });
        fx.cq_events.clear();
        fx.cnp_received.clear();
    }

    static uint64_t drops(const Counters& c) {
        uint64_t s = 0;
        for (uint64_t d : c.drops) s += d;
        return s;
    }

    // Hands the frame to the engine (flat or cut in two at `cut`) and checks
    // its drop accounting against what our own parse says of it.
    void deliver(std::span<const uint8_t> f, size_t cut) {
        wire::RocePacket mine;
        const wire::ParseError pe = wire::parse_roce(f, mine, {.verify_icrc = true});
        const int q = pe == wire::ParseError::Ok ? qp_index(mine.bth.dqpn) : -1;
        const Counters before = eng->counters();
        const Counters qbefore = q >= 0 ? *eng->qp_counters(qpn[q]) : Counters{};
        const bool ud_send = q == kUd && mine.bth.pkey == wire::kDefaultPkey &&
                             (mine.l3.dst == local || mine.l3.dst == local6) &&
                             (mine.bth.opcode == (wire::op::kUd | wire::op::SEND_ONLY) ||
                              mine.bth.opcode == (wire::op::kUd | wire::op::SEND_ONLY_IMM));
        ud_expect = UdExpect{ud_send, mine.payload_len, f.data() + mine.l3_off, mine.l3.v6, mine.payload};
        ud_seen = false;
        const size_t ud_queued = rq[kUd].size();
        now += Nanos{100};
        const bool chained = cut > 0 && cut < f.size();
        if (chained) {
            const std::span<const uint8_t> segs[2] = {f.subspan(0, cut), f.subspan(cut)};
            eng->on_frame_chain(segs, now, fx);
        } else {
            eng->on_frame(f, now, fx);
        }
        const Counters& after = eng->counters();
        const uint64_t dropped = drops(after) - drops(before);
        auto moved = [&](DropReason r) { return after.drops[size_t(r)] - before.drops[size_t(r)]; };
        if (dropped > 1) fail("one frame moved more than one drop counter");
        if (after.rcvd_pkts - before.rcvd_pkts > 1) fail("one frame counted twice as received");
        const uint64_t split = moved(DropReason::SplitHeaders);
        if (pe == wire::ParseError::BadIcrc) {
            if (moved(DropReason::BadIcrc) + split != 1) fail("a frame with a bad ICRC was not dropped as such");
        } else if (pe != wire::ParseError::Ok) {
            if (moved(DropReason::ParseError) + split != 1) fail("a frame that does not parse was not dropped as such");
        } else if (q >= 0 && dropped) {
            // A drop after the QP was found is counted on the QP as well.
            const Counters& qa = *eng->qp_counters(qpn[q]);
            for (size_t r = 0; r < after.drops.size(); ++r) {
                const auto reason = static_cast<DropReason>(r);
                const bool engine_level = reason == DropReason::ParseError || reason == DropReason::BadIcrc ||
                                          reason == DropReason::BadPkey || reason == DropReason::NotForUs ||
                                          reason == DropReason::UnknownQpn || reason == DropReason::SplitHeaders;
                if (!engine_level && after.drops[r] != before.drops[r] &&
                    qa.drops[r] - qbefore.drops[r] != after.drops[r] - before.drops[r])
                    fail("a QP-level drop not counted on its QP");
            }
        }
        // The UD model, for a frame that passed every integrity check.
        poll();
        if (ud_send && pe == wire::ParseError::Ok && !split) {
            if (!ud_seen) {
                if (mine.deth.qkey != kQkey) {
                    if (moved(DropReason::BadQkey) != 1) fail("a UD SEND with a wrong Q_Key was not dropped as such");
                } else if (ud_queued == 0) {
                    if (moved(DropReason::NoRecvWqe) != 1) fail("a UD SEND without a RECV posted was not dropped as such");
                } else {
                    fail("a well-formed UD SEND with the right Q_Key and a RECV posted did not complete");
                }
            } else if (mine.deth.qkey != kQkey) {
                fail("a UD SEND with a wrong Q_Key completed");
            }
        }
        ud_expect.armed = false;
        pump();
        poll();
    }

    // Encodes p (payload from `payload`) into `frame`; 0 when it does not encode.
    size_t encode(wire::RocePacket& p, uint32_t pay) {
        if (!(p.info().flags & wire::kOpPayload)) pay = 0;
        p.payload = payload.data();
        p.payload_len = pay;
        return wire::encode_roce(p, frame);
    }

    // Truncation, one byte overwritten (the ICRC then fixed or not), a chain cut.
    void mangle_and_deliver(size_t len, Input& in) {
        const uint8_t m = in.u8();
        if ((m & 7) == 1 && len > 1) len = in.u16() % len;  // truncated: fails to parse or its ICRC
        if ((m & 7) == 2 && len) {
            const size_t at = in.u16() % len;
            frame[at] = in.u8();
            if (m & 8) fix_checksums(len);
        }
        const size_t cut = (m & 0x30) == 0x30 ? in.u16() % (len + 1) : 0;
        deliver(std::span<const uint8_t>(frame.data(), len), cut);
    }

    // Recomputes the IPv4 header checksum and the ICRC of a frame that parses.
    void fix_checksums(size_t len) {
        wire::RocePacket p;
        if (wire::parse_roce(std::span<const uint8_t>(frame.data(), len), p, {.verify_icrc = false}) !=
            wire::ParseError::Ok)
            return;
        uint8_t* ip = frame.data() + p.l3_off;
        if (!p.l3.v6) {
            wire::store_be16(ip + 10, 0);
            wire::store_be16(ip + 10, wire::ip_checksum(ip, 20));
        }
        const size_t icrc_off = p.frame_len - wire::kIcrcLen;
        wire::store_le32(frame.data() + icrc_off, wire::compute_icrc(ip, icrc_off - p.l3_off, p.l3.v6));
    }

    wire::RocePacket request(int q) const {
        wire::RocePacket p = fuzz::from_peer(mac, local, peer, qpn[q]);
        p.l3.ecn = wire::ecn::kEct0;
        p.deth.qkey = kQkey;
        p.deth.src_qp = Qpn{0x99};
        return p;
    }

    uint8_t class_base(int q) const { return q == kUd ? wire::op::kUd : q == kUc ? wire::op::kUc : wire::op::kRc; }

    // R_Key and VA for an RDMA/atomic request: mostly inside the MR.
    void remote(Input& in, uint32_t len, uint64_t& va, uint32_t& rkey) {
        const uint8_t k = in.u8();
        const uint64_t room = kRdmaLen - std::min<uint64_t>(len, kRdmaLen);
        va = reinterpret_cast<uint64_t>(rdma_mr_base()) + in.u16() % (room + 1);
        rkey = rdma_mr.rkey;
        switch (k % 16) {
            case 0: rkey = recv_mr.rkey; break;                    // no remote access
            case 1: rkey = other_mr.rkey; va = reinterpret_cast<uint64_t>(other.data()); break;  // other PD
            case 2: rkey = in.u32(); break;
            case 3: va -= 1 + in.u8(); break;                      // starts before the MR
            case 4: va = reinterpret_cast<uint64_t>(rdma_mr_base()) + kRdmaLen - in.u8(); break;  // runs past it
            default: break;
        }
    }

    // One request, any opcode near the QP's class, fields from the input.
    void packet(Input& in) {
        const uint8_t k = in.u8();
        const int q = k % kNumQps;
        wire::RocePacket p = request(q);
        const uint8_t o = in.u8();
        p.bth.opcode = o & 0x80 ? o : static_cast<uint8_t>(class_base(q) | (o % 0x1e));
        const int8_t d = static_cast<int8_t>(in.u8());
        p.bth.psn = query(q).rq_psn + static_cast<uint32_t>(d / 8);
        p.bth.ackreq = k & 0x10;
        const uint8_t f = in.u8();
        uint32_t pay = f & 1 ? kMtu : f & 2 ? in.u16() % 4200 : in.u8();
        uint32_t rlen = f & 4 ? pay : in.u16();
        if (f & 8) rlen = in.u32();
        remote(in, rlen, p.reth.va, p.reth.rkey);
        p.reth.dma_len = rlen;
        uint32_t akey;
        remote(in, 8, p.atomic.va, akey);
        if (!(f & 0x10)) p.atomic.va &= ~uint64_t{7};
        p.atomic.rkey = akey;
        p.atomic.swap_add = in.u64();
        p.atomic.compare = f & 0x20 ? in.u64() : 0;
        p.imm = in.u32();
        if (f & 0x40) p.deth.qkey = in.u32();
        const uint8_t h = in.u8();
        if (h & 1) p.l3.ecn = wire::ecn::kCe;
        if ((h & 6) == 2) p.bth.pkey = in.u16();
        if ((h & 6) == 4) p.l3.src = wire::IpAddr::from_v4(in.u32());
        if ((h & 0x18) == 0x18) {  // IPv6 (the UD QP takes it; the others do not match the peer)
            p.l2.ethertype = 0x86DD;
            p.l3.v6 = true;
            p.l3.dst = local6;
            p.l3.src.b = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 1};
        }
        fuzz::fill_pattern(payload.data(), pay, h);
        if (kTrace) std::fprintf(stderr, "packet qp %d op 0x%02x psn %06x pay %u\n", q, p.bth.opcode, p.bth.psn.value(), pay);
        const size_t len = encode(p, pay);
        if (len) mangle_and_deliver(len, in);
    }

    // A whole message to one QP from its expected PSN, packets permuted.
    void message(Input& in) {
        const uint8_t k = in.u8();
        const int q = 1 + k % 3;  // UC, RC, spraying RC (UD messages are single packets: `packet`)
        const uint8_t kind = (k >> 2) % 6;  // send, send imm, write, write imm, read, atomic
        const uint32_t npkts = kind >= 4 ? 1 : 1 + in.u8() % 6;
        const uint32_t last_len = in.u16() % (kMtu + 1);
        const uint32_t total = (npkts - 1) * kMtu + last_len;
        const Psn first = query(q).rq_psn;
        wire::RocePacket p = request(q);
        const uint8_t base = class_base(q);
        remote(in, total, p.reth.va, p.reth.rkey);
        p.reth.dma_len = total;
        if (kind == 5) {
            uint32_t akey;
            remote(in, 8, p.atomic.va, akey);
            p.atomic.va &= ~uint64_t{7};
            p.atomic.rkey = akey;
            p.atomic.swap_add = in.u64();
            p.atomic.compare = in.u64();
        }
        p.imm = in.u32();
        struct Pkt {
            uint32_t idx;
            bool dup;
        };
        std::vector<Pkt> order;
        for (uint32_t i = 0; i < npkts; ++i) order.push_back({i, false});
        const uint8_t perm = in.u8();
        if (perm & 1)
            for (uint32_t i = 0; i + 1 < npkts; ++i) std::swap(order[i], order[i + in.u8() % (npkts - i)]);
        if ((perm & 6) == 2 && npkts > 1) order.erase(order.begin() + in.u8() % npkts);  // one lost
        if ((perm & 6) == 4) order.insert(order.begin() + in.u8() % (order.size() + 1), Pkt{in.u8() % npkts, true});
        for (const Pkt& x : order) {
            const uint32_t i = x.idx;
            const bool f = i == 0, l = i == npkts - 1;
            uint8_t op;
            switch (kind) {
                case 0:
                case 1:
                    op = f && l ? (kind ? wire::op::SEND_ONLY_IMM : wire::op::SEND_ONLY)
                         : f    ? wire::op::SEND_FIRST
                         : l    ? (kind ? wire::op::SEND_LAST_IMM : wire::op::SEND_LAST)
                                : wire::op::SEND_MIDDLE;
                    break;
                case 2:
                case 3:
                    op = f && l ? (kind == 3 ? wire::op::WRITE_ONLY_IMM : wire::op::WRITE_ONLY)
                         : f    ? wire::op::WRITE_FIRST
                         : l    ? (kind == 3 ? wire::op::WRITE_LAST_IMM : wire::op::WRITE_LAST)
                                : wire::op::WRITE_MIDDLE;
                    break;
                case 4: op = wire::op::READ_REQUEST; break;
                default: op = perm & 8 ? wire::op::COMPARE_SWAP : wire::op::FETCH_ADD; break;
            }
            p.bth.opcode = static_cast<uint8_t>(base | op);
            p.bth.psn = first + i;
            p.bth.ackreq = l || (perm & 0x10);
            const uint32_t pay = kind >= 4 ? 0 : l ? last_len : kMtu;
            fuzz::fill_pattern(payload.data(), pay, static_cast<uint8_t>(i * 31 + perm));
            if (kTrace)
                std::fprintf(stderr, "msg qp %d op 0x%02x psn %06x pay %u%s\n", q, p.bth.opcode, p.bth.psn.value(), pay,
                             x.dup ? " (repeat)" : "");
            const size_t len = encode(p, pay);
            if (len) mangle_and_deliver(len, in);
        }
    }

    void raw(Input& in) {
        const size_t n = std::min<size_t>(in.u16() % 1200, in.n);
        std::memcpy(frame.data(), in.p, n);
        in.p += n;
        in.n -= n;
        deliver(std::span<const uint8_t>(frame.data(), n), 0);
    }

    void tick(Input& in) {
        const uint8_t k = in.u8();
        const Nanos t = eng->next_timer();
        if (k & 1 && t != Nanos::max() && t > now) now = t;
        else now += Nanos{static_cast<int64_t>(k) * 200};
        eng->on_timer(now, fx);
        pump();
        poll();
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Target t;  // fresh per input: the invariants track every RECV posted
    // Two RECVs on each queue to start with (post_recv's encoding).
    static const uint8_t kInitial[] = {0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x10, 0xC0, 0x02, 0x00, 0x20, 0xC0,
                                       0x00, 0x00, 0x08, 0x80, 0x01, 0x00, 0x18, 0xC0, 0x02, 0x00, 0x28, 0xC0};
    Input init{kInitial, sizeof kInitial};
    while (!init.empty()) t.post_recv(init);
    Input in{data, size};
    for (int steps = 0; !in.empty() && steps < 128; ++steps) {
        switch (in.u8() % 8) {
            case 0:
            case 1:
            case 2: t.message(in); break;
            case 3:
            case 4: t.packet(in); break;
            case 5: t.post_recv(in); break;
            case 6: t.tick(in); break;
            default: t.raw(in); break;
        }
    }
    t.poll();
    t.check_flushed();
    t.check_guards();
    return 0;
}
