#include "verbs/perf.hpp"

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ring.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "dataplane/dpdk/eal.hpp"
#include "tools/rocemu/oob.hpp"

namespace rocemu::verbs {

const char* to_string(PerfOp op) {
    switch (op) {
        case PerfOp::Write: return "write";
        case PerfOp::Read: return "read";
        case PerfOp::Send: return "send";
        case PerfOp::Atomic: return "atomic";
    }
    return "?";
}

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMaxBufferBytes = 64ull << 20;  // per side and QP: bounds the slots of big messages
constexpr uint32_t kAllAccess =
    transport::kLocalWrite | transport::kRemoteWrite | transport::kRemoteRead | transport::kRemoteAtomic;
const auto kStall = std::chrono::seconds(5);
constexpr uint64_t kIndexMask = (1ull << 48) - 1;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The bytes of slot `slot` of QP `q` on side `side` (0 requester, 1
// responder): a word sequence both processes of a two-process run can
// regenerate, so each checks what arrived without the other's memory.
uint64_t pattern_word(uint32_t slot, uint32_t q, int side, uint64_t j) {
    return (static_cast<uint64_t>(slot) << 40 ^ static_cast<uint64_t>(q) << 24 ^ static_cast<uint64_t>(side) << 23 ^
            (j + 1)) * 0x9E3779B97F4A7C15ull;
}

void fill_slot(uint8_t* p, uint32_t size, uint32_t slot, uint32_t q, int side) {
    uint32_t off = 0;
    for (uint64_t j = 0; off < size; ++j, off += 8) {
        const uint64_t w = pattern_word(slot, q, side, j);
        std::memcpy(p + off, &w, std::min<uint32_t>(8, size - off));
    }
}

bool slot_matches(const uint8_t* p, uint32_t size, uint32_t slot, uint32_t q, int side) {
    uint32_t off = 0;
    for (uint64_t j = 0; off < size; ++j, off += 8) {
        const uint64_t w = pattern_word(slot, q, side, j);
        if (std::memcmp(p + off, &w, std::min<uint32_t>(8, size - off)) != 0) return false;
    }
    return true;
}

// The responder's FETCH_ADD target of QP q before the run: slot 0's first word.
uint64_t atomic_initial(uint32_t q) { return pattern_word(0, q, 1, 0); }

// One QP's buffers on one side: `slots` messages of `size` bytes.
struct Buffers {
    std::vector<uint8_t> mem;
    MrHandle mr;
    uint8_t* slot(uint32_t s, uint32_t size) { return mem.data() + static_cast<uint64_t>(s) * size; }
};

// Where the peer's buffers of one QP are.
struct RemoteMr {
    uint64_t addr = 0;
    uint32_t rkey = 0;
};

// Everything one run creates on one device, torn down at the end. Side 0
// posts the operations; side 1 is the target (and receives SENDs).
struct Side {
    Context* c;
    PdHandle pd;
    int index;
    const PerfOptions& o;
    uint32_t size = 0, slots = 0, depth = 0;
    CqHandle cq;
    std::vector<Qpn> qpn;
    std::vector<Buffers> buf;
    std::string error;

    Side(Context* ctx, PdHandle p, int i, const PerfOptions& opts) : c(ctx), pd(p), index(i), o(opts) {}
    ~Side() {
        for (Qpn q : qpn) c->destroy_qp(q);
        for (Buffers& b : buf)
            if (b.mr.lkey && c->dereg_mr(b.mr)) {
                fmt::print(stderr, "perf: dereg_mr: {}; its buffer is kept\n", c->last_error());
                keep_pinned(std::move(b.mem));
            }
        if (cq.id) c->destroy_cq(cq);
    }

    int fail() {
        error = c->last_error();
        return EINVAL;
    }

    // CQ, buffers (filled with the pattern) and QPs in INIT.
    int setup() {
        size = o.op == PerfOp::Atomic ? 8 : o.size;
        depth = o.latency ? 1 : o.tx_depth;
        slots = static_cast<uint32_t>(std::clamp<uint64_t>(kMaxBufferBytes / size, 1, depth));
        if (c->create_cq(2 * depth * o.qps + 16, nullptr, cq)) return fail();
        buf.resize(o.qps);
        for (uint32_t q = 0; q < o.qps; ++q) {
            Buffers& b = buf[q];
            b.mem.resize(static_cast<uint64_t>(slots) * size);
            for (uint32_t k = 0; k < slots; ++k) fill_slot(b.slot(k, size), size, k, q, index);
            if (c->reg_mr(pd, b.mem.data(), b.mem.size(), kAllAccess, b.mr)) return fail();
            QpInitAttr ia;
            ia.pd = pd;
            ia.send_cq = cq;
            ia.recv_cq = cq;
            ia.cap.max_send_wr = depth;
            ia.cap.max_recv_wr = depth;
            Qpn n;
            if (c->create_qp(ia, n)) return fail();
            qpn.push_back(n);
            QpAttr a;
            a.qp_state = QpState::Init;
            a.qp_access_flags = kAllAccess;
            if (c->modify_qp(n, a,
                             transport::kAttrState | transport::kAttrPkeyIndex | transport::kAttrPort |
                                 transport::kAttrAccessFlags))
                return fail();
        }
        return 0;
    }

    RemoteMr mr_of(uint32_t q) { return {reinterpret_cast<uint64_t>(buf[q].mem.data()), buf[q].mr.rkey}; }

    // RTR then RTS towards the peer's QP.
    int connect(uint32_t q, Qpn dest, Psn rq_psn, Psn sq_psn, const AddressVector& av, PathMtu mtu) {
        QpAttr a;
        a.qp_state = QpState::Rtr;
        a.dest_qp_num = dest;
        a.rq_psn = rq_psn;
        a.path_mtu = mtu;
        a.max_dest_rd_atomic = 16;
        a.min_rnr_timer = 1;
        a.ah_attr = av;
        if (c->modify_qp(qpn[q], a,
                         transport::kAttrState | transport::kAttrAv | transport::kAttrPathMtu |
                             transport::kAttrDestQpn | transport::kAttrRqPsn | transport::kAttrMaxDestRdAtomic |
                             transport::kAttrMinRnrTimer))
            return fail();
        a.qp_state = QpState::Rts;
        a.sq_psn = sq_psn;
        a.max_rd_atomic = 16;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        if (c->modify_qp(qpn[q], a,
                         transport::kAttrState | transport::kAttrSqPsn | transport::kAttrTimeout |
                             transport::kAttrRetryCnt | transport::kAttrRnrRetry | transport::kAttrMaxQpRdAtomic))
            return fail();
        return 0;
    }

    int post_recv(uint32_t q, uint64_t i) {
        Buffers& b = buf[q];
        RecvWr r;
        r.wr_id = static_cast<uint64_t>(q) << 48 | i;
        r.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(b.slot(static_cast<uint32_t>(i % slots), size)), size,
                                b.mr.lkey});
        return c->post_recv(qpn[q], std::span(&r, 1)) ? fail() : 0;
    }

    // Operation i of QP q, from local slot i % slots to the same remote slot.
    int post(uint32_t q, uint64_t i, const RemoteMr& remote) {
        const uint32_t k = static_cast<uint32_t>(i % slots);
        Buffers& l = buf[q];
        SendWr w;
        w.wr_id = static_cast<uint64_t>(q) << 48 | i;
        w.send_flags = transport::kSendSignaled;
        w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(l.slot(k, size)), size, l.mr.lkey});
        w.rkey = remote.rkey;
        w.remote_addr = remote.addr + static_cast<uint64_t>(k) * size;
        switch (o.op) {
            case PerfOp::Write: w.opcode = WrOpcode::RdmaWrite; break;
            case PerfOp::Read: w.opcode = WrOpcode::RdmaRead; break;
            case PerfOp::Send: w.opcode = WrOpcode::Send; break;
            case PerfOp::Atomic:
                w.opcode = WrOpcode::AtomicFetchAndAdd;
                w.compare_add = 1;
                w.remote_addr = remote.addr;
                break;
        }
        return c->post_send(qpn[q], std::span(&w, 1)) ? fail() : 0;
    }

    // After a run: slots WRITEs reached hold the requester's bytes, and each
    // FETCH_ADD target grew by exactly its QP's count. Returns the bad ones.
    uint64_t check_target(const std::vector<uint64_t>& done) {
        uint64_t bad = 0;
        for (uint32_t q = 0; q < o.qps && q < done.size(); ++q) {
            if (o.op == PerfOp::Write) {
                const uint32_t used = static_cast<uint32_t>(std::min<uint64_t>(slots, done[q]));
                for (uint32_t k = 0; k < used; ++k) bad += !slot_matches(buf[q].slot(k, size), size, k, q, 0);
            } else if (o.op == PerfOp::Atomic) {
                uint64_t now;
                std::memcpy(&now, buf[q].slot(0, 8), 8);
                bad += now != atomic_initial(q) + done[q];
            }
        }
        return bad;
    }
};

// The receiving side of SEND runs: keeps `depth` RECVs posted per QP and
// checks each message's bytes against the requester's slot.
struct Receiver {
    Side& s;
    std::vector<uint64_t> posted, recvd;
    uint64_t errors = 0;

    explicit Receiver(Side& side) : s(side), posted(side.o.qps, 0), recvd(side.o.qps, 0) {}

    int start() {
        for (uint32_t q = 0; q < s.o.qps; ++q)
            while (posted[q] < s.depth)
                if (s.post_recv(q, posted[q]++)) return EINVAL;
        return 0;
    }

    // One poll of the CQ; 0, or an errno value with `error`.
    int poll(std::string& error) {
        Wc wc[32];
        const int n = s.c->poll_cq(s.cq, wc);
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != WcStatus::Success) {
                error = fmt::format("RECV completed with {}", wc_status_str(wc[i].status));
                return EIO;
            }
            const uint32_t q = static_cast<uint32_t>(wc[i].wr_id >> 48);
            const uint64_t idx = wc[i].wr_id & kIndexMask;
            const uint32_t k = static_cast<uint32_t>(idx % s.slots);
            if (s.o.verify && (wc[i].byte_len != s.size || !slot_matches(s.buf[q].slot(k, s.size), s.size, k, q, 0)))
                ++errors;
            ++recvd[q];
            if (s.post_recv(q, posted[q]++)) {
                error = s.error;
                return EINVAL;
            }
        }
        return 0;
    }
};

// Two processes on a shared machine: a side that has found nothing to do for
// a while sleeps a few microseconds, as the Lcore poll thread does. A
// process that slept is woken ahead of the busy ones around it, so the two
// sides run together far more often than two spinning processes would.
class Idler {
public:
    explicit Idler(bool enabled) : enabled_(enabled) {}
    void turn(bool worked) {
        if (worked) {
            idle_ = 0;
        } else if (enabled_ && ++idle_ > kIdleTurns) {
            const timespec ts{0, 20000};
            nanosleep(&ts, nullptr);
        }
    }

private:
    static constexpr uint32_t kIdleTurns = 64;
    bool enabled_;
    uint32_t idle_ = 0;
};

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())));
    return sorted[i];
}

// The requester's run on side 0: keeps the WRs in flight, takes completions,
// checks READ bytes and fetched values (with verify), and measures.
// `between()` runs once per turn and returns 0 or an errno value (with
// `error` set) that ends the run. `done` gets the completed count per QP.
template <typename Between>
int drive(Side& s, const std::vector<RemoteMr>& remote, PerfResult& out, std::vector<uint64_t>& done,
          std::string& error, Between&& between) {
    const PerfOptions& o = s.o;
    const bool timed = o.duration_s > 0;
    const uint64_t per_qp = timed ? UINT64_MAX : o.iters;
    std::vector<uint64_t> posted(o.qps, 0);
    done.assign(o.qps, 0);
    std::vector<double> lat;
    std::vector<Clock::time_point> posted_at(o.latency ? o.qps : 0);
    if (o.latency) lat.reserve(timed ? 1 << 20 : o.iters * o.qps);

    const double cpu_start = thread_cpu_seconds();
    const Clock::time_point start = Clock::now();
    const Clock::time_point end = timed ? start + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(o.duration_s))
                                        : Clock::time_point::max();
    Clock::time_point window_start = start, last_progress = start;
    uint64_t window_msgs = 0, total = 0;
    double peak = 0;
    bool stop_posting = false;
    Idler idler(o.sleep_when_idle);
    for (;;) {
        const Clock::time_point now = Clock::now();
        if (timed && now >= end) stop_posting = true;
        bool all_done = true;
        for (uint32_t q = 0; q < o.qps; ++q) {
            while (!stop_posting && posted[q] < per_qp && posted[q] - done[q] < s.depth) {
                if (o.latency) posted_at[q] = Clock::now();
                if (s.post(q, posted[q], remote[q])) {
                    error = s.error;
                    return EINVAL;
                }
                ++posted[q];
            }
            if (done[q] < (stop_posting ? posted[q] : per_qp)) all_done = false;
        }
        if (all_done) break;
        Wc wc[32];
        const int n = s.c->poll_cq(s.cq, wc);
        // A second clock read per turn only where completions are timed one
        // by one: it was 5% of a 4 KiB WRITE client's cycles over memif.
        const Clock::time_point t = o.latency ? Clock::now() : now;
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != WcStatus::Success) {
                error = fmt::format("{} completed with {}", to_string(o.op), wc_status_str(wc[i].status));
                return EIO;
            }
            const uint32_t q = static_cast<uint32_t>(wc[i].wr_id >> 48);
            const uint64_t idx = wc[i].wr_id & kIndexMask;
            if (o.latency) lat.push_back(std::chrono::duration<double, std::micro>(t - posted_at[q]).count());
            if (o.verify) {
                const uint32_t k = static_cast<uint32_t>(idx % s.slots);
                if (o.op == PerfOp::Read) {
                    out.verify_errors += !slot_matches(s.buf[q].slot(k, s.size), s.size, k, q, 1);
                } else if (o.op == PerfOp::Atomic) {
                    // RC executes in PSN order: operation i fetches the value i earlier ones left.
                    uint64_t fetched;
                    std::memcpy(&fetched, s.buf[q].slot(k, 8), 8);
                    out.verify_errors += fetched != atomic_initial(q) + idx;
                }
            }
            ++done[q];
            ++total;
            ++window_msgs;
            last_progress = t;
        }
        if (const int e = between()) return e;
        idler.turn(n > 0 || s.c->progress() > 0);
        if (t - window_start >= std::chrono::milliseconds(1)) {
            peak = std::max(peak, static_cast<double>(window_msgs) * s.size * 8 / seconds(t - window_start) / 1e9);
            window_start = t;
            window_msgs = 0;
        }
        if (t - last_progress > kStall) {
            error = fmt::format("no completion for 5 s ({} of {} done)", total, timed ? total : o.iters * o.qps);
            return ETIMEDOUT;
        }
    }
    const double secs = seconds(Clock::now() - start);
    out.cpu_s = thread_cpu_seconds() - cpu_start;
    out.bytes = s.size;
    out.iterations = total;
    out.bw_avg_gbps = static_cast<double>(total) * s.size * 8 / secs / 1e9;
    out.bw_peak_gbps = std::max(peak, out.bw_avg_gbps);
    out.msg_rate_mpps = static_cast<double>(total) / secs / 1e6;
    if (o.latency && !lat.empty()) {
        std::sort(lat.begin(), lat.end());
        out.t_min = lat.front();
        out.t_typical = percentile(lat, 0.5);
        double sum = 0;
        for (double v : lat) sum += v;
        out.t_avg = sum / static_cast<double>(lat.size());
        out.t_99 = percentile(lat, 0.99);
        out.t_999 = percentile(lat, 0.999);
    }
    return 0;
}

std::string check_options(const PerfOptions& o) {
    if (o.size < 1 || o.size > (1u << 30) || o.qps < 1 || o.tx_depth < 1 || (o.iters < 1 && o.duration_s <= 0))
        return "size must be 1 B-1 GiB, qps, tx depth and iterations (or a duration) at least 1";
    return {};
}

}  // namespace

struct LoopbackPerf::Impl {
    rte_ring* ab = nullptr;
    rte_ring* ba = nullptr;
    std::unique_ptr<Context> ctx[2];
    PdHandle pd[2];
    uint32_t ip[2] = {0x0AFE0001u, 0x0AFE0002u};

    ~Impl() {
        ctx[0].reset();
        ctx[1].reset();
        rte_ring_free(ab);
        rte_ring_free(ba);
    }
};

LoopbackPerf::LoopbackPerf(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoopbackPerf::~LoopbackPerf() = default;

std::unique_ptr<LoopbackPerf> LoopbackPerf::open(const PerfOptions& base, std::string& error) {
    if (!dpdk::Eal::init(base.eal_args, error)) return nullptr;
    auto m = std::make_unique<Impl>();
    static int serial = 0;
    const std::string s = std::to_string(serial++);
    m->ab = rte_ring_create(("perf_ab" + s).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    m->ba = rte_ring_create(("perf_ba" + s).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!m->ab || !m->ba) {
        error = "cannot create the net_ring pair's rings";
        return nullptr;
    }
    rte_ring* rx[2] = {m->ba, m->ab};
    rte_ring* tx[2] = {m->ab, m->ba};
    for (int i = 0; i < 2; ++i) {
        const int id = rte_eth_from_rings(("perf" + s + "_" + std::to_string(i)).c_str(), &rx[i], 1, &tx[i], 1,
                                          SOCKET_ID_ANY);
        if (id < 0) {
            error = "rte_eth_from_rings failed";
            return nullptr;
        }
        DeviceOptions o;
        o.attach_port = id;
        o.mbufs = 8191;
        o.progress = Progress::App;
        o.host.ip = fmt::format("10.254.0.{}/24", i + 1);
        o.host.mac = fmt::format("02:00:00:00:fe:0{}", i + 1);
        o.host.port_mtu = static_cast<int>(base.port_mtu);
        o.mtu_set = base.port_mtu != 1500;  // a ring port carries 1500 already
        o.nic = base.nic;
        m->ctx[i] = Context::open(o, base.eal_args, error);
        if (!m->ctx[i]) return nullptr;
        if (m->ctx[i]->alloc_pd(m->pd[i])) {
            error = m->ctx[i]->last_error();
            return nullptr;
        }
    }
    return std::unique_ptr<LoopbackPerf>(new LoopbackPerf(std::move(m)));
}

int LoopbackPerf::run(const PerfOptions& o, PerfResult& out, std::string& error) {
    Impl& m = *impl_;
    if (error = check_options(o); !error.empty()) return EINVAL;
    Side a(m.ctx[0].get(), m.pd[0], 0, o), b(m.ctx[1].get(), m.pd[1], 1, o);
    if (a.setup() || b.setup()) {
        error = a.error.empty() ? b.error : a.error;
        return EINVAL;
    }
    PortAttr pa;
    a.c->query_port(1, pa);
    for (uint32_t q = 0; q < o.qps; ++q)
        for (Side* s : {&a, &b}) {
            Side& peer = s == &a ? b : a;
            AddressVector av;
            av.dgid = wire::IpAddr::from_v4(m.ip[1 - s->index]);
            av.sgid_index = static_cast<uint8_t>(s->c->default_gid_index());
            if (s->connect(q, peer.qpn[q], Psn{0}, Psn{0}, av, pa.active_mtu)) {
                error = s->error;
                return EINVAL;
            }
        }
    Receiver rx(b);
    if (o.op == PerfOp::Send && rx.start()) {
        error = b.error;
        return EINVAL;
    }
    std::vector<RemoteMr> remote;
    for (uint32_t q = 0; q < o.qps; ++q) remote.push_back(b.mr_of(q));
    std::vector<uint64_t> done;
    const int e = drive(a, remote, out, done, error, [&] { return o.op == PerfOp::Send ? rx.poll(error) : 0; });
    if (e) return e;
    if (o.verify) {
        out.verify_errors += b.check_target(done) + rx.errors;
        if (o.op == PerfOp::Send)
            for (uint32_t q = 0; q < o.qps; ++q) out.verify_errors += rx.recvd[q] != done[q];
    }
    return 0;
}

namespace {

// The two-process exchange, one text line per message (oob::LineConn):
//   client: HELLO rocemu-perf/1 OP SIZE QPS DEPTH LATENCY VERIFY MTU
//   server: OK MTU | ERR message
//   each:   QP q qpn psn gid addr rkey   (one per QP; the client's first)
//   each:   READY                        (its QPs are at RTS; the server's RECVs are posted)
//   client: DONE counts... figures...    | ABORT message
//   server: RESULT bad_count message     (the server's checks; also ABORT at any time)
//   client: closes the connection once its port is closed; the server exits after that
constexpr const char* kProtocol = "rocemu-perf/1";

std::vector<std::string> words(const std::string& line) {
    std::vector<std::string> w;
    size_t i = 0;
    while (i < line.size()) {
        const size_t j = line.find(' ', i);
        const size_t e = j == std::string::npos ? line.size() : j;
        if (e > i) w.push_back(line.substr(i, e - i));
        i = e + 1;
    }
    return w;
}

// The rest of `line` after its first `n` words.
std::string tail_after(const std::string& line, size_t n) {
    size_t i = 0;
    for (size_t k = 0; k < n && i != std::string::npos; ++k) {
        i = line.find(' ', i);
        if (i != std::string::npos) ++i;
    }
    return i == std::string::npos ? std::string() : line.substr(i);
}

std::optional<PerfOp> op_from(const std::string& s) {
    for (PerfOp op : {PerfOp::Write, PerfOp::Read, PerfOp::Send, PerfOp::Atomic})
        if (s == to_string(op)) return op;
    return std::nullopt;
}

std::string gid_hex(const Gid& g) {
    std::string s;
    for (uint8_t b : g) s += fmt::format("{:02x}", b);
    return s;
}

bool parse_gid(const std::string& s, wire::IpAddr& out) {
    if (s.size() != 32) return false;
    for (size_t i = 0; i < 16; ++i) {
        char* end = nullptr;
        const std::string byte = s.substr(2 * i, 2);
        const unsigned long v = std::strtoul(byte.c_str(), &end, 16);
        if (*end != '\0') return false;
        out.b[i] = static_cast<uint8_t>(v);
    }
    return true;
}

struct PeerQp {
    Qpn qpn;
    Psn psn;
    wire::IpAddr gid;
    RemoteMr mr;
};

std::optional<PeerQp> parse_qp(const std::string& line, uint32_t q) {
    const std::vector<std::string> w = words(line);
    if (w.size() != 7 || w[0] != "QP" || std::strtoul(w[1].c_str(), nullptr, 10) != q) return std::nullopt;
    PeerQp p;
    p.qpn = Qpn{static_cast<uint32_t>(std::strtoul(w[2].c_str(), nullptr, 16))};
    p.psn = Psn{static_cast<uint32_t>(std::strtoul(w[3].c_str(), nullptr, 16)) & 0xFFFFFF};
    if (!parse_gid(w[4], p.gid)) return std::nullopt;
    p.mr.addr = std::strtoull(w[5].c_str(), nullptr, 16);
    p.mr.rkey = static_cast<uint32_t>(std::strtoul(w[6].c_str(), nullptr, 16));
    return p;
}

class Remote {
public:
    Remote(Context& ctx, PerfOptions& o, const PerfPeer& peer) : ctx_(ctx), o_(o), peer_(peer) {}

    int run(PerfResult& out, std::string& error) {
        const int e = peer_.server.empty() ? serve(out) : client(out);
        if (client_side() && peer_.linger) *peer_.linger = std::move(conn_);
        error = error_;
        return e;
    }

private:
    bool client_side() const { return !peer_.server.empty(); }
    auto idle() {
        return [this] { ctx_.progress(); };
    }

    int fail(int e, std::string msg) {
        error_ = std::move(msg);
        return e;
    }
    // Tells the peer why this side gives up (best effort), and gives up.
    int abort(int e, std::string msg) {
        std::string ignored;
        if (conn_) conn_->send("ABORT " + msg, ignored);
        return fail(e, std::move(msg));
    }
    bool recv(std::string& line) {
        if (conn_->recv(line, peer_.wait, error_, idle())) {
            if (line.rfind("ABORT ", 0) == 0) {
                error_ = fmt::format("the {} gave up: {}", client_side() ? "server" : "client", line.substr(6));
                return false;
            }
            return true;
        }
        error_ = fmt::format("{}: {}", client_side() ? "server" : "client", error_);
        return false;
    }
    bool send(const std::string& line) {
        if (conn_->send(line, error_)) return true;
        error_ = fmt::format("{}: {}", client_side() ? "server" : "client", error_);
        return false;
    }

    // Both sides from HELLO/OK on: QPs, the exchange, RTR/RTS, READY.
    int connect_qps(Side& side, PathMtu mtu) {
        if (side.setup()) return abort(EINVAL, side.error);
        Gid g;
        ctx_.query_gid(1, peer_.gid_index, g);
        std::vector<std::string> mine;
        for (uint32_t q = 0; q < o_.qps; ++q) {
            psn_.push_back(Psn{static_cast<uint32_t>(lrand48()) & 0xFFFFFF});
            const RemoteMr mr = side.mr_of(q);
            mine.push_back(fmt::format("QP {} {:06x} {:06x} {} {:x} {:x}", q, side.qpn[q].v, psn_[q].value(), gid_hex(g),
                                       mr.addr, mr.rkey));
        }
        auto send_mine = [&] {
            for (const std::string& l : mine)
                if (!send(l)) return false;
            return true;
        };
        if (client_side() && !send_mine()) return EIO;
        for (uint32_t q = 0; q < o_.qps; ++q) {
            std::string line;
            if (!recv(line)) return EIO;
            const std::optional<PeerQp> p = parse_qp(line, q);
            if (!p) return abort(EINVAL, fmt::format("malformed QP record {}: \"{}\"", q, line));
            peers_.push_back(*p);
        }
        if (!client_side() && !send_mine()) return EIO;
        for (uint32_t q = 0; q < o_.qps; ++q) {
            AddressVector av;
            av.dgid = peers_[q].gid;
            av.sgid_index = static_cast<uint8_t>(peer_.gid_index);
            av.hop_limit = 64;
            if (side.connect(q, peers_[q].qpn, peers_[q].psn, psn_[q], av, mtu)) return abort(EINVAL, side.error);
        }
        return 0;
    }

    int barrier() {
        std::string line;
        if (!send("READY") || !recv(line)) return EIO;
        if (line != "READY") return abort(EINVAL, fmt::format("expected READY, got \"{}\"", line));
        return 0;
    }

    int client(PerfResult& out) {
        conn_ = oob::connect_lines(peer_.server, peer_.tcp_port, peer_.wait, error_);
        if (!conn_) return fail(ETIMEDOUT, "no perf server: " + error_);
        if (!send(fmt::format("HELLO {} {} {} {} {} {} {} {}", kProtocol, to_string(o_.op), o_.size, o_.qps,
                              o_.tx_depth, int{o_.latency}, int{o_.verify}, transport::mtu_bytes(peer_.mtu))))
            return EIO;
        std::string line;
        if (!recv(line)) return EIO;
        const std::vector<std::string> w = words(line);
        if (!w.empty() && w[0] == "ERR") return fail(EINVAL, "the server refused the run: " + tail_after(line, 1));
        if (w.size() != 2 || w[0] != "OK") return fail(EINVAL, fmt::format("unexpected answer \"{}\"", line));
        const auto mtu = transport::path_mtu_from_bytes(static_cast<uint32_t>(std::strtoul(w[1].c_str(), nullptr, 10)));
        if (!mtu) return fail(EINVAL, fmt::format("the server chose a bad path MTU: \"{}\"", line));
        if (ctx_.alloc_pd(pd_)) return abort(EINVAL, ctx_.last_error());
        Side side(&ctx_, pd_, 0, o_);
        if (const int e = connect_qps(side, *mtu)) return e;
        if (const int e = barrier()) return e;
        std::vector<RemoteMr> remote;
        for (const PeerQp& p : peers_) remote.push_back(p.mr);
        std::vector<uint64_t> done;
        auto last_check = Clock::now();
        const int e = drive(side, remote, out, done, error_, [&] {
            // A server that gave up says so; look every millisecond.
            const auto t = Clock::now();
            if (t - last_check < std::chrono::milliseconds(1)) return 0;
            last_check = t;
            std::string l, err;
            const int r = conn_->try_recv(l, err);
            if (r == 0) return 0;
            error_ = r > 0 && l.rfind("ABORT ", 0) == 0 ? "the server gave up: " + l.substr(6) : "server: " + err;
            return EIO;
        });
        if (e) return e == EIO && error_.rfind("the server", 0) == 0 ? e : abort(e, error_);
        std::string counts;
        for (uint64_t d : done) counts += fmt::format("{},", d);
        counts.pop_back();
        if (!send(fmt::format("DONE {} {} {} {} {} {} {} {} {} {} {} {}", counts, out.bytes, out.iterations,
                              out.bw_peak_gbps, out.bw_avg_gbps, out.msg_rate_mpps, out.t_min, out.t_typical,
                              out.t_avg, out.t_99, out.t_999, out.verify_errors)) ||
            !recv(line))
            return EIO;
        const std::vector<std::string> rw = words(line);
        if (rw.size() < 2 || rw[0] != "RESULT") return fail(EIO, fmt::format("unexpected answer \"{}\"", line));
        const uint64_t server_bad = std::strtoull(rw[1].c_str(), nullptr, 10);
        if (server_bad) {
            out.verify_errors += server_bad;
            error_ = "the server found " + tail_after(line, 2);
        }
        if (out.verify_errors && error_.empty())
            error_ = fmt::format("{} {}s brought back wrong bytes", out.verify_errors, to_string(o_.op));
        return 0;
    }

    // The server's answer to HELLO: "" to go on, else why not.
    std::string check_hello(const std::vector<std::string>& w, PathMtu& mtu) {
        if (w.size() != 9 || w[0] != "HELLO" || w[1] != kProtocol)
            return "the client does not speak " + std::string(kProtocol);
        const std::optional<PerfOp> op = op_from(w[2]);
        if (!op) return fmt::format("unknown op {}", w[2]);
        if (*op != o_.op)
            return fmt::format("the client runs {} but this server runs {}: start both with the same op",
                               w[2], to_string(o_.op));
        const uint32_t size = static_cast<uint32_t>(std::strtoul(w[3].c_str(), nullptr, 10));
        if (peer_.size_given && o_.op != PerfOp::Atomic && size != o_.size)
            return fmt::format("the client sends {} B messages but this server was started with -s {}: give both "
                               "the same -s, or none to the server",
                               size, o_.size);
        o_.size = size;
        o_.qps = static_cast<uint32_t>(std::strtoul(w[4].c_str(), nullptr, 10));
        o_.tx_depth = static_cast<uint32_t>(std::strtoul(w[5].c_str(), nullptr, 10));
        o_.latency = w[6] == "1";
        o_.verify = w[7] == "1";
        o_.iters = 1;
        if (const std::string e = check_options(o_); !e.empty()) return e;
        if (o_.qps > 512) return "at most 512 QPs";
        const auto theirs = transport::path_mtu_from_bytes(static_cast<uint32_t>(std::strtoul(w[8].c_str(), nullptr, 10)));
        if (!theirs) return fmt::format("bad path MTU {}", w[8]);
        mtu = std::min(*theirs, peer_.mtu);
        return {};
    }

    int serve(PerfResult& out) {
        conn_ = oob::accept_lines(peer_.tcp_port, peer_.wait, error_);
        if (!conn_) return fail(ETIMEDOUT, error_);
        std::string line;
        if (!recv(line)) return EIO;
        PathMtu mtu = peer_.mtu;
        if (const std::string e = check_hello(words(line), mtu); !e.empty()) {
            std::string ignored;
            conn_->send("ERR " + e, ignored);
            return fail(EINVAL, e);
        }
        if (!send(fmt::format("OK {}", transport::mtu_bytes(mtu)))) return EIO;
        if (ctx_.alloc_pd(pd_)) return abort(EINVAL, ctx_.last_error());
        Side side(&ctx_, pd_, 1, o_);
        if (const int e = connect_qps(side, mtu)) return e;
        Receiver rx(side);
        if (o_.op == PerfOp::Send && rx.start()) return abort(EINVAL, side.error);
        if (const int e = barrier()) return e;
        // Serve until the client is done: the NIC answers, RECVs are reposted.
        std::string err;
        auto last_check = Clock::now();
        Idler idler(o_.sleep_when_idle);
        for (uint32_t turn = 0;; ++turn) {
            if (o_.op == PerfOp::Send) {
                if (const int e = rx.poll(err)) return abort(e, err);
            }
            idler.turn(ctx_.progress() > 0);
            // The socket is looked at every millisecond: a recv per turn would cost more than the turn.
            if (turn % 64 != 0) continue;
            const auto t = Clock::now();
            if (t - last_check < std::chrono::milliseconds(1)) continue;
            last_check = t;
            const int r = conn_->try_recv(line, err);
            if (r < 0) return fail(EIO, "client: " + err);
            if (r > 0) break;
        }
        if (line.rfind("ABORT ", 0) == 0) return fail(EIO, "the client gave up: " + line.substr(6));
        const std::vector<std::string> w = words(line);
        if (w.size() != 13 || w[0] != "DONE") return abort(EINVAL, fmt::format("expected DONE, got \"{}\"", line));
        std::vector<uint64_t> done;
        for (size_t i = 0, j; i <= w[1].size(); i = j + 1) {
            j = std::min(w[1].find(',', i), w[1].size());
            done.push_back(std::strtoull(w[1].substr(i, j - i).c_str(), nullptr, 10));
        }
        if (done.size() != o_.qps) return abort(EINVAL, fmt::format("DONE has {} counts for {} QPs", done.size(), o_.qps));
        out.bytes = static_cast<uint32_t>(std::strtoul(w[2].c_str(), nullptr, 10));
        out.iterations = std::strtoull(w[3].c_str(), nullptr, 10);
        double* figures[] = {&out.bw_peak_gbps, &out.bw_avg_gbps, &out.msg_rate_mpps, &out.t_min,
                             &out.t_typical,    &out.t_avg,       &out.t_99,          &out.t_999};
        for (size_t i = 0; i < std::size(figures); ++i) *figures[i] = std::strtod(w[4 + i].c_str(), nullptr);
        const uint64_t client_bad = std::strtoull(w[12].c_str(), nullptr, 10);
        // Every SEND the client saw acknowledged has completed a RECV here, or will within a few turns.
        if (o_.op == PerfOp::Send) {
            const auto deadline = Clock::now() + kStall;
            auto behind = [&] {
                for (uint32_t q = 0; q < o_.qps; ++q)
                    if (rx.recvd[q] < done[q]) return true;
                return false;
            };
            while (behind() && Clock::now() < deadline)
                if (const int e = rx.poll(err)) return abort(e, err);
        }
        uint64_t bad = 0;
        std::string what;
        if (o_.verify) {
            bad = side.check_target(done) + rx.errors;
            if (o_.op == PerfOp::Send)
                for (uint32_t q = 0; q < o_.qps; ++q) bad += rx.recvd[q] != done[q];
            if (bad) what = fmt::format("{} {} messages with wrong bytes in the server's memory", bad, to_string(o_.op));
        }
        if (!send(fmt::format("RESULT {} {}", bad, what))) return EIO;
        // No more polling: wait for the client to close the connection, which it does after its port (see
        // PerfPeer::linger), so that neither side's memif disconnects under the other's poll.
        std::string ignored;
        conn_->recv(line, peer_.wait, ignored, [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
        out.verify_errors = bad + client_bad;
        if (bad) error_ = what;
        else if (client_bad) error_ = fmt::format("the client found {} {}s with wrong bytes", client_bad, to_string(o_.op));
        return 0;
    }

    Context& ctx_;
    PerfOptions& o_;
    const PerfPeer& peer_;
    PdHandle pd_;
    std::unique_ptr<oob::LineConn> conn_;
    std::vector<Psn> psn_;
    std::vector<PeerQp> peers_;
    std::string error_;
};

}  // namespace

int run_remote(Context& ctx, PerfOptions& o, const PerfPeer& peer, PerfResult& out, std::string& error) {
    if (peer.server.empty()) o.iters = 1;  // the client decides; keeps check_options quiet
    if (error = check_options(o); !error.empty()) return EINVAL;
    return Remote(ctx, o, peer).run(out, error);
}

std::string LoopbackPerf::counters() {
    std::string out;
    for (int s = 0; s < 2; ++s) {
        Context& c = *impl_->ctx[s];
        for (const auto& [name, v] : c.port_counters())
            if (v) out += fmt::format("{} {} {}\n", c.name(), name, v);
        Counters e;
        c.query_counters(e);
        transport::for_each_counter(e, [&](const char* name, uint64_t v) {
            if (v) out += fmt::format("{} {} {}\n", c.name(), name, v);
        });
    }
    return out;
}

std::string perf_bw_header() {
    return fmt::format(" {:<10} {:<13} {:<18} {:<21} {:<14}", "#bytes", "#iterations", "BW peak[Gb/sec]",
                       "BW average[Gb/sec]", "MsgRate[Mpps]");
}
std::string perf_bw_line(const PerfResult& r) {
    return fmt::format(" {:<10} {:<13} {:<18.2f} {:<21.2f} {:<14.6f}", r.bytes, r.iterations, r.bw_peak_gbps,
                       r.bw_avg_gbps, r.msg_rate_mpps);
}
std::string perf_lat_header() {
    return fmt::format(" {:<10} {:<13} {:<13} {:<17} {:<13} {:<22} {:<24}", "#bytes", "#iterations", "t_min[usec]",
                       "t_typical[usec]", "t_avg[usec]", "99% percentile[usec]", "99.9% percentile[usec]");
}
std::string perf_lat_line(const PerfResult& r) {
    return fmt::format(" {:<10} {:<13} {:<13.2f} {:<17.2f} {:<13.2f} {:<22.2f} {:<24.2f}", r.bytes, r.iterations,
                       r.t_min, r.t_typical, r.t_avg, r.t_99, r.t_999);
}

}  // namespace rocemu::verbs
