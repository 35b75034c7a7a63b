// `rocemu rdma-ops`: the other side of tests/interop/guest/rdma_ops.c (RDMA
// WRITE, READ, FETCH_AND_ADD and CMP_AND_SWAP over one RC QP, then RDMA WRITE
// WITH IMMEDIATE, SEND WITH IMMEDIATE, and a SEND, a multi-packet and a
// single-packet WRITE WITH IMMEDIATE each RNR-NAKed and retried, checked end
// to end; with --srq the server's QP receives from an SRQ). It speaks that program's TCP exchange (an 87-byte
// LID:QPN:PSN:GID:RKEY:VADDR:LEN record each way, then 5-byte tokens, see
// tests/interop/README.md, "rdma_ops protocol") so either side can be rxe.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <thread>

#include "tools/rocemu/commands.hpp"
#include "tools/rocemu/nic_cli.hpp"
#include "tools/rocemu/oob.hpp"
#include "tools/rocemu/qp_setup.hpp"
#include "verbs/verbs.hpp"

namespace rocemu::cli {
namespace {

using namespace rocemu::verbs;

constexpr size_t kRecordLen = 87;  // 86 characters and a NUL
constexpr size_t kFaOff = 0;
constexpr size_t kCsOff = 8;
constexpr size_t kDataOff = 16;
constexpr uint64_t kFaInitial = 0x1000000000000000ULL;
constexpr uint64_t kCsMissSwap = 0xdeaddeaddeaddeadULL;
// Immediate values as numbers: big-endian on the wire, and rocemu's SendWr/Wc
// imm_data is the host-order value of those bytes (ibverbs: htonl/ntohl).
constexpr uint32_t kImmWrite = 0x1a2b3c4d;
constexpr uint32_t kImmSend = 0x5e6f7081;
constexpr uint32_t kImmRnrWrite = 0x2c3d4e5f;
constexpr uint32_t kImmRnrWrite1 = 0x6b7c8d9e;  // the single-packet RNR WRITE WITH IMM
constexpr uint32_t kRnrSendMax = 256;  // the RNR SEND: one packet at any path MTU
constexpr uint32_t kAccess =
    transport::kLocalWrite | transport::kRemoteWrite | transport::kRemoteRead | transport::kRemoteAtomic;
const Nanos kExchangeTimeout = Nanos::from_s(120);

struct RdmaOpsOptions : NicCliOptions {
    uint32_t size = 4096;
    int iters = 10;
    int tcp_port = oob::kDefaultPort;
    int timeout_s = 30;
    bool srq = false;  // the server's receives go to an SRQ
};

struct Peer {
    uint16_t lid = 0;
    uint32_t qpn = 0;
    uint32_t psn = 0;
    Gid gid{};
    uint32_t rkey = 0;
    uint64_t vaddr = 0;
    uint32_t len = 0;
};

// Varies with both the iteration and the offset so a stale or shifted buffer never matches.
uint8_t pattern(int i, size_t j) { return static_cast<uint8_t>(static_cast<size_t>(i) * 131u + j * 7u + (j >> 8) + 1u); }

std::array<char, kRecordLen> format_record(const Peer& p) {
    std::string gid;
    for (uint8_t b : p.gid) gid += fmt::format("{:02x}", b);
    const std::string s =
        fmt::format("{:04x}:{:06x}:{:06x}:{}:{:08x}:{:016x}:{:08x}", p.lid, p.qpn, p.psn, gid, p.rkey, p.vaddr, p.len);
    std::array<char, kRecordLen> out{};
    std::memcpy(out.data(), s.data(), std::min(s.size(), kRecordLen - 1));
    return out;
}

std::optional<Peer> parse_record(const std::array<char, kRecordLen>& in) {
    if (in[kRecordLen - 1] != '\0' || std::strlen(in.data()) != kRecordLen - 1) return std::nullopt;
    unsigned lid, qpn, psn, rkey, len;
    uint64_t vaddr;
    char gid[33];
    if (std::sscanf(in.data(), "%4x:%6x:%6x:%32[0-9a-f]:%8x:%16" SCNx64 ":%8x", &lid, &qpn, &psn, gid, &rkey, &vaddr,
                    &len) != 7 ||
        std::strlen(gid) != 32)
        return std::nullopt;
    Peer p;
    for (size_t i = 0; i < 16; ++i) {
        unsigned b;
        if (std::sscanf(gid + 2 * i, "%2x", &b) != 1) return std::nullopt;
        p.gid[i] = static_cast<uint8_t>(b);
    }
    p.lid = static_cast<uint16_t>(lid);
    p.qpn = qpn;
    p.psn = psn;
    p.rkey = rkey;
    p.vaddr = vaddr;
    p.len = len;
    return p;
}

class RdmaOps {
public:
    RdmaOps(const RdmaOpsOptions& o, Context& ctx) : o_(o), ctx_(ctx) {}

    int run() {
        if (!setup()) return 1;
        Peer me;
        me.qpn = qpn_.v;
        me.psn = static_cast<uint32_t>(lrand48() & 0xffffff);
        ctx_.query_gid(1, gidx_, me.gid);
        me.rkey = mr_.rkey;
        me.vaddr = reinterpret_cast<uint64_t>(buf_);
        me.len = static_cast<uint32_t>(buf_len_);
        if (o_.server.empty()) std::memcpy(buf_ + kFaOff, &kFaInitial, 8);
        const auto rec = format_record(me);
        std::string err;
        const Nanos io_timeout = kExchangeTimeout;
        bool ok = false;
        std::array<char, kRecordLen> in{};
        if (!o_.server.empty()) {
            const int fd = oob::tcp_connect(o_.server, static_cast<uint16_t>(o_.tcp_port), kExchangeTimeout, err);
            if (fd < 0) return fail(err);
            std::optional<Peer> rem;
            if (!oob::detail::write_all(fd, rec.data(), rec.size(), err) ||
                !oob::detail::read_exact(fd, in.data(), in.size(), io_timeout, err) || !(rem = parse_record(in))) {
                oob::detail::close_fd(fd);
                return fail("exchange with " + o_.server + " failed" + (err.empty() ? "" : ": " + err));
            }
            if (std::string e = connect_qp(me.psn, *rem); !e.empty()) {
                oob::detail::close_fd(fd);
                return fail(e);
            }
            ok = client_ops(*rem);
            if (!put_token(fd, ok ? "DONE" : "FAIL") || !get_token(fd, "PASS", "server's check of its region")) {
                oob::detail::close_fd(fd);
                return 1;
            }
            ok = client_imm_ops(*rem, fd);
            if (!put_token(fd, ok ? "DONE" : "FAIL") || !get_token(fd, "PASS", "server verdict")) ok = false;
            oob::detail::close_fd(fd);
        } else {
            const int fd = oob::detail::listen_and_accept(static_cast<uint16_t>(o_.tcp_port), kExchangeTimeout, err);
            if (fd < 0) return fail(err);
            std::optional<Peer> rem;
            if (!oob::detail::read_exact(fd, in.data(), in.size(), io_timeout, err) || !(rem = parse_record(in))) {
                oob::detail::close_fd(fd);
                return fail("exchange with the client failed" + (err.empty() ? "" : ": " + err));
            }
            if (std::string e = connect_qp(me.psn, *rem); !e.empty()) {
                oob::detail::close_fd(fd);
                return fail(e);
            }
            if (!oob::detail::write_all(fd, rec.data(), rec.size(), err)) {
                oob::detail::close_fd(fd);
                return fail("lost the client: " + err);
            }
            // The client runs every operation before it answers, so this wait
            // covers the whole loop.
            const Nanos whole_run = Nanos::from_s(static_cast<int64_t>(o_.timeout_s) * 5 * o_.iters) + io_timeout;
            ok = get_token(fd, "DONE", "client's operations", whole_run) && server_check() && post_recv_region();
            if (!put_token(fd, ok ? "PASS" : "FAIL") || !ok) {
                oob::detail::close_fd(fd);
                return 1;
            }
            ok = server_imm_ops(fd) && get_token(fd, "DONE", "client's immediate and RNR operations");
            put_token(fd, ok ? "PASS" : "FAIL");
            oob::detail::close_fd(fd);
        }
        print_counters();
        fmt::print("rocemu rdma-ops: {} {}\n", o_.server.empty() ? "server" : "client", ok ? "PASS" : "FAIL");
        return ok ? 0 : 1;
    }

    // The ibverbs teardown order: the QP first (nothing more lands in the
    // buffer), then the MR (dereg_mr waits for zero-copy frames that still
    // read it), the SRQ, the CQ and the PD. A buffer whose MR stays
    // registered is never freed under the NIC.
    ~RdmaOps() {
        if (qpn_.v && ctx_.destroy_qp(qpn_)) fail("destroy_qp failed: " + ctx_.last_error());
        if (mr_.lkey && ctx_.dereg_mr(mr_))
            fail("dereg_mr failed: " + ctx_.last_error() + "; its buffer is kept");
        else
            std::free(buf_);
        if (srq_.id && ctx_.destroy_srq(srq_)) fail("destroy_srq failed: " + ctx_.last_error());
        if (cq_.id && ctx_.destroy_cq(cq_)) fail("destroy_cq failed: " + ctx_.last_error());
        if (pd_.id && ctx_.dealloc_pd(pd_)) fail("dealloc_pd failed: " + ctx_.last_error());
    }

private:
    int fail(const std::string& msg) {
        fmt::print(stderr, "rocemu rdma-ops: {}\n", msg);
        return 1;
    }

    bool setup() {
        if (std::string e = resolve_gid_and_mtu(ctx_, o_, gidx_, mtu_); !e.empty()) return !fail(e);
        buf_len_ = kDataOff + o_.size;
        if (posix_memalign(reinterpret_cast<void**>(&buf_), 4096, buf_len_) != 0) return !fail("out of memory");
        std::memset(buf_, 0, buf_len_);
        if (ctx_.alloc_pd(pd_) || ctx_.reg_mr(pd_, buf_, buf_len_, kAccess, mr_) || ctx_.create_cq(16, nullptr, cq_))
            return !fail("pd/mr/cq setup failed: " + ctx_.last_error());
        // Only a server with --srq receives through an SRQ; a client never receives.
        if (o_.srq && o_.server.empty() && ctx_.create_srq(pd_, 2, 1, srq_))
            return !fail("create_srq failed: " + ctx_.last_error());
        QpInitAttr ia;
        ia.qp_type = QpType::Rc;
        ia.pd = pd_;
        ia.send_cq = cq_;
        ia.recv_cq = cq_;
        ia.srq = srq_;
        ia.cap.max_send_wr = 4;
        ia.cap.max_recv_wr = srq_.id ? 0 : 2;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = srq_.id ? 0 : 1;
        if (ctx_.create_qp(ia, qpn_)) return !fail("create_qp failed: " + ctx_.last_error());
        if (modify_qp_to_init(ctx_, qpn_, kAccess)) return !fail("modify_qp INIT failed: " + ctx_.last_error());
        return true;
    }

    std::string connect_qp(uint32_t my_psn, const Peer& rem) {
        RcPeer peer;
        peer.mtu = mtu_;
        std::copy(rem.gid.begin(), rem.gid.end(), peer.av.dgid.b.begin());
        peer.av.sgid_index = static_cast<uint8_t>(gidx_);
        peer.av.hop_limit = 1;
        peer.dest_qpn = Qpn{rem.qpn};
        peer.rq_psn = Psn{rem.psn};
        peer.sq_psn = Psn{my_psn};
        return connect_rc_qp(ctx_, qpn_, peer, "modify_qp RTR failed: ", "modify_qp RTS failed: ");
    }

    bool post_wr(SendWr& w, const char* what) {
        w.send_flags = transport::kSendSignaled;
        if (ctx_.post_send(qpn_, std::span(&w, 1)) == 0) return true;
        return !fail(fmt::format("post {} failed: {}", what, ctx_.last_error()));
    }

    // Waits (bounded by -t) for one completion and checks its status and opcode.
    bool wait_wc(Wc& wc, WcOpcode want, const char* what) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o_.timeout_s);
        int n;
        while ((n = ctx_.poll_cq(cq_, std::span(&wc, 1))) == 0) {
            if (std::chrono::steady_clock::now() > deadline)
                return !fail(fmt::format("{}: no completion within {} s", what, o_.timeout_s));
            std::this_thread::yield();
        }
        if (n < 0 || wc.status != WcStatus::Success || wc.opcode != want)
            return !fail(fmt::format("{} completed with status {} ({}), opcode {}", what, wc_status_str(wc.status),
                                     static_cast<int>(wc.status), static_cast<int>(wc.opcode)));
        return true;
    }

    // Posts one signaled WR and waits (bounded by -t) for its completion.
    bool run_wr(SendWr& w, WcOpcode want, const char* what) {
        Wc wc;
        return post_wr(w, what) && wait_wc(wc, want, what);
    }

    // True if data[0..len) holds pattern(i, .), else says where it differs.
    bool check_pattern(const uint8_t* data, size_t len, int i, const char* what) {
        for (size_t j = 0; j < len; ++j)
            if (data[j] != pattern(i, j))
                return !fail(fmt::format("{}: byte {} is 0x{:02x}, expected 0x{:02x}", what, j, data[j], pattern(i, j)));
        return true;
    }

    static void fill_pattern(uint8_t* data, size_t len, int i) {
        for (size_t j = 0; j < len; ++j) data[j] = pattern(i, j);
    }

    // The SEND WITH IMMEDIATE length: two full packets and a partial third
    // (3000 B at path MTU 1024), at most the region.
    uint32_t send_imm_len() const { return std::min(3 * transport::mtu_bytes(mtu_) - 72, o_.size); }
    uint32_t rnr_send_len() const { return std::min(kRnrSendMax, o_.size); }

    // 5-byte tokens of the exchange ("DONE", "FAIL", "PASS", "SENT").
    bool put_token(int fd, const char* t) {
        std::string err;
        return oob::detail::write_all(fd, t, 5, err) || !fail("lost the peer: " + err);
    }

    // The peer's step takes a few completions at most; `wait` overrides that bound.
    bool get_token(int fd, const char* want, const char* step, std::optional<Nanos> wait = std::nullopt) {
        std::string err;
        char t[5];
        const Nanos bound = wait.value_or(Nanos::from_s(static_cast<int64_t>(o_.timeout_s) * 3) + kExchangeTimeout);
        if (!oob::detail::read_exact(fd, t, 5, bound, err)) return !fail(fmt::format("{}: lost the peer: {}", step, err));
        if (t[4] != '\0' || std::strcmp(t, want) != 0) return !fail(fmt::format("{}: peer says {:.4s}", step, t));
        return true;
    }

    bool client_ops(const Peer& rem) {
        if (rem.len < kDataOff + o_.size)
            return !fail(fmt::format("server region is {} bytes, need {}", rem.len, kDataOff + o_.size));
        uint8_t* data = buf_ + kDataOff;
        uint64_t* result = reinterpret_cast<uint64_t*>(buf_);
        uint64_t fa_expect = kFaInitial;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < o_.iters; ++i) {
            fill_pattern(data, o_.size, i);
            SendWr w;
            w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(data), o_.size, mr_.lkey});
            w.opcode = WrOpcode::RdmaWrite;
            w.remote_addr = rem.vaddr + kDataOff;
            w.rkey = rem.rkey;
            if (!run_wr(w, WcOpcode::RdmaWrite, "RDMA WRITE")) return false;
            std::memset(data, 0, o_.size);
            w.opcode = WrOpcode::RdmaRead;
            if (!run_wr(w, WcOpcode::RdmaRead, "RDMA READ")) return false;
            if (!check_pattern(data, o_.size, i, "RDMA READ")) return false;

            SendWr a;
            a.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(result), 8, mr_.lkey});
            a.rkey = rem.rkey;
            *result = 0;
            a.opcode = WrOpcode::AtomicFetchAndAdd;
            a.remote_addr = rem.vaddr + kFaOff;
            a.compare_add = static_cast<uint64_t>(i) + 1;
            if (!run_wr(a, WcOpcode::FetchAdd, "FETCH_AND_ADD")) return false;
            if (*result != fa_expect)
                return !fail(fmt::format("iteration {}: FETCH_AND_ADD returned 0x{:x}, expected 0x{:x}", i, *result,
                                         fa_expect));
            fa_expect += static_cast<uint64_t>(i) + 1;

            // A matching compare must swap; a stale one must not.
            a.opcode = WrOpcode::AtomicCmpAndSwp;
            a.remote_addr = rem.vaddr + kCsOff;
            a.compare_add = static_cast<uint64_t>(i);
            a.swap = static_cast<uint64_t>(i) + 1;
            *result = ~uint64_t{0};
            if (!run_wr(a, WcOpcode::CompSwap, "CMP_AND_SWAP")) return false;
            if (*result != static_cast<uint64_t>(i))
                return !fail(fmt::format("iteration {}: CMP_AND_SWAP returned 0x{:x}, expected 0x{:x}", i, *result, i));
            a.swap = kCsMissSwap;
            *result = ~uint64_t{0};
            if (!run_wr(a, WcOpcode::CompSwap, "CMP_AND_SWAP (miss)")) return false;
            if (*result != static_cast<uint64_t>(i) + 1)
                return !fail(fmt::format("iteration {}: missing CMP_AND_SWAP returned 0x{:x}, expected 0x{:x}", i,
                                         *result, i + 1));
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        fmt::print("rocemu rdma-ops: client: {} iterations of WRITE+READ {} B, FETCH_AND_ADD, 2x CMP_AND_SWAP ok in "
                   "{:.3f} s\n",
                   o_.iters, o_.size, s);
        return true;
    }

    // What the client's operations must have left in this side's region.
    bool server_check() {
        const uint64_t n = static_cast<uint64_t>(o_.iters);
        uint64_t fa, cs;
        std::memcpy(&fa, buf_ + kFaOff, 8);
        std::memcpy(&cs, buf_ + kCsOff, 8);
        if (fa != kFaInitial + n * (n + 1) / 2)
            return !fail(fmt::format("server: FETCH_AND_ADD word is 0x{:x}, expected 0x{:x}", fa,
                                     kFaInitial + n * (n + 1) / 2));
        if (cs != n) return !fail(fmt::format("server: CMP_AND_SWAP word is 0x{:x}, expected 0x{:x}", cs, n));
        if (!check_pattern(buf_ + kDataOff, o_.size, o_.iters - 1, "server: region after the WRITEs")) return false;
        fmt::print("rocemu rdma-ops: server: region holds the last WRITE, FETCH_AND_ADD word 0x{:x}, CMP_AND_SWAP "
                   "word {}\n",
                   fa, cs);
        return true;
    }

    // Client, after the server's first PASS: RDMA WRITE WITH IMMEDIATE, SEND
    // WITH IMMEDIATE (multi-packet), then a SEND and a multi-packet WRITE WITH
    // IMMEDIATE each posted before the server has a receive for it, so the
    // server must RNR-NAK it and this QP (rnr_retry 7) retry until it
    // completes. Each step waits for the server's token.
    bool client_imm_ops(const Peer& rem, int fd) {
        uint8_t* data = buf_ + kDataOff;
        const int n = o_.iters;
        const auto t0 = std::chrono::steady_clock::now();
        SendWr w;
        w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(data), o_.size, mr_.lkey});
        fill_pattern(data, o_.size, n);
        w.opcode = WrOpcode::RdmaWriteWithImm;
        w.imm_data = kImmWrite;
        w.remote_addr = rem.vaddr + kDataOff;
        w.rkey = rem.rkey;
        if (!run_wr(w, WcOpcode::RdmaWrite, "RDMA WRITE WITH IMM") ||
            !get_token(fd, "PASS", "server's check of the WRITE WITH IMM"))
            return false;

        w.sg_list[0].length = send_imm_len();
        fill_pattern(data, send_imm_len(), n + 1);
        w.opcode = WrOpcode::SendWithImm;
        w.imm_data = kImmSend;
        if (!run_wr(w, WcOpcode::Send, "SEND WITH IMM") || !get_token(fd, "PASS", "server's check of the SEND WITH IMM"))
            return false;

        w.sg_list[0].length = rnr_send_len();
        fill_pattern(data, rnr_send_len(), n + 2);
        w.opcode = WrOpcode::Send;
        w.imm_data = 0;
        if (!client_rnr_step(w, fd, "SEND (RNR)") || !get_token(fd, "PASS", "server's check of the RNR SEND"))
            return false;

        // Only the last packet consumes the receive: with size > path MTU the
        // RNR NAK comes after the earlier packets' bytes are placed.
        w.sg_list[0].length = o_.size;
        fill_pattern(data, o_.size, n + 3);
        w.opcode = WrOpcode::RdmaWriteWithImm;
        w.imm_data = kImmRnrWrite;
        if (!client_rnr_step(w, fd, "RDMA WRITE WITH IMM (RNR)") ||
            !get_token(fd, "PASS", "server's check of the RNR WRITE WITH IMM"))
            return false;

        // One packet (WRITE_ONLY_WITH_IMMEDIATE): the RNR NAK refuses the whole request.
        w.sg_list[0].length = rnr_send_len();
        fill_pattern(data, rnr_send_len(), n + 4);
        w.imm_data = kImmRnrWrite1;
        if (!client_rnr_step(w, fd, "single-packet RDMA WRITE WITH IMM (RNR)")) return false;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        fmt::print("rocemu rdma-ops: client: WRITE WITH IMM {} B, SEND WITH IMM {} B, RNR-retried SEND {} B and WRITE "
                   "WITH IMM {} B and {} B ok in {:.3f} s\n",
                   o_.size, send_imm_len(), rnr_send_len(), o_.size, rnr_send_len(), s);
        return true;
    }

    // Posts a request the server has no receive for yet, says SENT, and waits
    // for its completion: the responder RNR-NAKs it until the receive is posted.
    bool client_rnr_step(SendWr& w, int fd, const char* what) {
        Wc wc;
        const WcOpcode want = w.opcode == WrOpcode::Send ? WcOpcode::Send : WcOpcode::RdmaWrite;
        return post_wr(w, what) && put_token(fd, "SENT") && wait_wc(wc, want, what);
    }

    bool post_recv_region() {
        RecvWr r;
        r.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(buf_ + kDataOff), o_.size, mr_.lkey});
        const int rc = srq_.id ? ctx_.post_srq_recv(srq_, std::span(&r, 1)) : ctx_.post_recv(qpn_, std::span(&r, 1));
        if (rc == 0) return true;
        return !fail("server: post_recv failed: " + ctx_.last_error());
    }

    // Waits for the next receive completion and checks it: opcode, immediate
    // (none if want_imm is empty), byte_len and the pattern(i, .) bytes.
    bool server_check_recv(WcOpcode op, std::optional<uint32_t> want_imm, uint32_t len, int i, const char* what) {
        Wc wc;
        if (!wait_wc(wc, op, what)) return false;
        const bool has_imm = (wc.wc_flags & transport::kWcWithImm) != 0;
        if (has_imm != want_imm.has_value() || (has_imm && wc.imm_data != *want_imm))
            return !fail(fmt::format("server: {}: immediate {} 0x{:08x}, expected {} 0x{:08x}", what,
                                     has_imm ? "present" : "absent", wc.imm_data, want_imm ? "present" : "absent",
                                     want_imm.value_or(0)));
        if (wc.byte_len != len) return !fail(fmt::format("server: {}: byte_len {}, expected {}", what, wc.byte_len, len));
        return check_pattern(buf_ + kDataOff, len, i, what);
    }

    uint64_t rnr_naks_sent() {
        Counters c;
        ctx_.query_counters(c);
        return c.send_rnr_err;
    }

    // Server side of client_imm_ops; a receive for the WRITE WITH IMM is already posted.
    bool server_imm_ops(int fd) {
        const int n = o_.iters;
        bool ok = server_check_recv(WcOpcode::RecvRdmaWithImm, kImmWrite, o_.size, n, "RDMA WRITE WITH IMM") &&
                  post_recv_region();
        if (!put_token(fd, ok ? "PASS" : "FAIL") || !ok) return false;
        ok = server_check_recv(WcOpcode::Recv, kImmSend, send_imm_len(), n + 1, "SEND WITH IMM");
        const uint64_t rnr_before = rnr_naks_sent();  // before the PASS that lets the client send
        if (!put_token(fd, ok ? "PASS" : "FAIL") || !ok) return false;
        ok = server_rnr_step(fd, rnr_before, WcOpcode::Recv, std::nullopt, rnr_send_len(), n + 2, "SEND (RNR)");
        const uint64_t rnr_mid = rnr_naks_sent();
        if (!put_token(fd, ok ? "PASS" : "FAIL") || !ok) return false;
        ok = server_rnr_step(fd, rnr_mid, WcOpcode::RecvRdmaWithImm, kImmRnrWrite, o_.size, n + 3,
                             "RDMA WRITE WITH IMM (RNR)");
        const uint64_t rnr_mid2 = rnr_naks_sent();
        if (!put_token(fd, ok ? "PASS" : "FAIL") || !ok) return false;
        if (!server_rnr_step(fd, rnr_mid2, WcOpcode::RecvRdmaWithImm, kImmRnrWrite1, rnr_send_len(), n + 4,
                             "single-packet RDMA WRITE WITH IMM (RNR)"))
            return false;
        fmt::print("rocemu rdma-ops: server{}: WRITE WITH IMM, SEND WITH IMM and the RNR-retried SEND and WRITE WITH "
                   "IMM (multi- and single-packet) arrived intact ({} + {} + {} RNR NAKs sent)\n",
                   srq_.id ? " (SRQ)" : "", rnr_mid - rnr_before, rnr_mid2 - rnr_mid, rnr_naks_sent() - rnr_mid2);
        return true;
    }

    // Server side of client_rnr_step: on SENT, waits (bounded) until this side
    // has RNR-NAKed the request (its RNR NAKs sent rose above rnr_before), then
    // posts the receive that lets the retry land and checks it.
    bool server_rnr_step(int fd, uint64_t rnr_before, WcOpcode op, std::optional<uint32_t> want_imm, uint32_t len,
                         int i, const char* what) {
        if (!get_token(fd, "SENT", what)) return false;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o_.timeout_s);
        while (rnr_naks_sent() <= rnr_before) {
            if (std::chrono::steady_clock::now() > deadline)
                return !fail(fmt::format("server: {}: no RNR NAK sent within {} s", what, o_.timeout_s));
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return post_recv_region() && server_check_recv(op, want_imm, len, i, what);
    }

    // One "counter NAME VALUE" line per engine counter, for scripts that
    // compare them with rxe's, and one "port NAME VALUE" line per non-zero
    // port counter (e.g. tx_zero_copy: frames sent as chains from MR pages).
    void print_counters() {
        Counters c;
        if (ctx_.query_counters(c)) return;
        transport::for_each_counter(c, [](const char* name, uint64_t v) { fmt::print("counter {} {}\n", name, v); });
        for (const auto& [name, v] : ctx_.port_counters())
            if (v) fmt::print("port {} {}\n", name, v);
    }

    const RdmaOpsOptions& o_;
    Context& ctx_;
    int gidx_ = 0;
    PathMtu mtu_ = PathMtu::Mtu1024;
    uint8_t* buf_ = nullptr;
    size_t buf_len_ = 0;
    PdHandle pd_;
    MrHandle mr_;
    CqHandle cq_;
    SrqHandle srq_;  // id 0: the QP has its own receive queue
    Qpn qpn_;
};

int run_rdma_ops(RdmaOpsOptions o) {
    if (std::string e = check_nic_options(o); !e.empty()) {
        fmt::print(stderr, "rocemu rdma-ops: {}\n", e);
        return 1;
    }
    if (o.size < 1 || o.size > (1u << 30) || o.iters < 1 || o.timeout_s < 1 || o.tcp_port < 1 || o.tcp_port > 65535) {
        fmt::print(stderr, "rocemu rdma-ops: -s must be 1..2^30, -n and -t at least 1, -p 1..65535\n");
        return 1;
    }
    srand48(static_cast<long>(getpid()) ^ static_cast<long>(time(nullptr)));
    std::string error;
    std::unique_ptr<Context> ctx = open_nic(o, error);
    if (!ctx) {
        fmt::print(stderr, "rocemu rdma-ops: {}\n", error);
        return 1;
    }
    RdmaOps ops(o, *ctx);
    const int status = ops.run();
    ctx->keep_port_open_at_exit();  // main() leaves with _Exit
    return status;
}

}  // namespace

void add_rdma_ops_command(CLI::App& app, int& status) {
    auto o = std::make_shared<RdmaOpsOptions>();
    CLI::App* cmd = app.add_subcommand(
        "rdma-ops",
        "RDMA WRITE, READ, FETCH_AND_ADD and CMP_AND_SWAP over one RC QP, then WRITE WITH IMM, SEND WITH IMM, and a "
        "SEND, a multi-packet and a single-packet WRITE WITH IMM each RNR-NAKed and retried, paired with tests/interop's rdma_ops "
        "(its 87-byte LID:QPN:PSN:GID:RKEY:VADDR:LEN exchange). Server (passive target) without SERVER_IP, client "
        "with it. EAL arguments go after `--`.");
    add_nic_options(cmd, *o);
    cmd->add_option("-s,--size", o->size, "WRITE/READ size in bytes")->capture_default_str();
    cmd->add_option("-n,--iters", o->iters, "iterations")->capture_default_str();
    cmd->add_option("-p,--tcp-port", o->tcp_port, "TCP port of the exchange")->capture_default_str();
    cmd->add_option("-t,--timeout", o->timeout_s, "seconds to wait for each completion")->capture_default_str();
    cmd->add_flag("-q,--srq", o->srq, "server: the QP receives from an SRQ (the RNR steps meet an empty SRQ)");
    cmd->add_option("server", o->server, "the server's IPv4 address (client mode)");
    cmd->add_option("eal", o->eal_args, "EAL arguments, after --");
    cmd->callback([o, &status] { status = run_rdma_ops(*o); });
}

}  // namespace rocemu::cli
