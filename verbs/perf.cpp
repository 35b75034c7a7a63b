#include "verbs/perf.hpp"

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ring.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "dataplane/dpdk/eal.hpp"

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

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMaxBufferBytes = 64ull << 20;  // per side and QP: bounds the slots of big messages
constexpr uint32_t kAllAccess =
    transport::kLocalWrite | transport::kRemoteWrite | transport::kRemoteRead | transport::kRemoteAtomic;
const auto kStall = std::chrono::seconds(5);

uint8_t pattern(uint32_t slot, uint64_t i, int side) { return static_cast<uint8_t>(slot * 131 + i * 7 + side * 29); }

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One QP's buffers on one side: `slots` messages of `size` bytes.
struct Buffers {
    std::vector<uint8_t> mem;
    MrHandle mr;
    uint8_t* slot(uint32_t s, uint32_t size) { return mem.data() + static_cast<uint64_t>(s) * size; }
};

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
        m->ctx[i] = Context::open(o, base.eal_args, error);
        if (!m->ctx[i]) return nullptr;
        if (m->ctx[i]->alloc_pd(m->pd[i])) {
            error = m->ctx[i]->last_error();
            return nullptr;
        }
    }
    return std::unique_ptr<LoopbackPerf>(new LoopbackPerf(std::move(m)));
}

namespace {

// Everything one run creates on the two devices, torn down at the end.
struct Run {
    Context* c[2];
    const PerfOptions& o;
    uint32_t size;
    uint32_t slots;
    CqHandle cq[2];
    std::vector<Qpn> qpn[2];
    std::vector<Buffers> buf[2];
    std::vector<uint64_t> posted, done, recvd;  // per QP
    std::string error;

    Run(Context* a, Context* b, const PerfOptions& opts) : c{a, b}, o(opts) {}

    ~Run() {
        for (int s = 0; s < 2; ++s) {
            for (Qpn q : qpn[s]) c[s]->destroy_qp(q);
            for (Buffers& b : buf[s])
                if (b.mr.lkey) c[s]->dereg_mr(b.mr);
            if (cq[s].id) c[s]->destroy_cq(cq[s]);
        }
    }

    int fail(int s) {
        error = c[s]->last_error();
        return EINVAL;
    }

    int setup(PdHandle pd[2], uint32_t ip[2]) {
        size = o.op == PerfOp::Atomic ? 8 : o.size;
        const uint32_t depth = o.latency ? 1 : o.tx_depth;
        slots = static_cast<uint32_t>(std::clamp<uint64_t>(kMaxBufferBytes / size, 1, depth));
        for (int s = 0; s < 2; ++s) {
            if (c[s]->create_cq(2 * depth * o.qps + 16, nullptr, cq[s])) return fail(s);
            buf[s].resize(o.qps);
            for (uint32_t q = 0; q < o.qps; ++q) {
                Buffers& b = buf[s][q];
                b.mem.resize(static_cast<uint64_t>(slots) * size);
                for (uint32_t k = 0; k < slots; ++k) std::memset(b.slot(k, size), pattern(k, q, s), size);
                if (c[s]->reg_mr(pd[s], b.mem.data(), b.mem.size(), kAllAccess, b.mr)) return fail(s);
                QpInitAttr ia;
                ia.pd = pd[s];
                ia.send_cq = cq[s];
                ia.recv_cq = cq[s];
                ia.cap.max_send_wr = depth;
                ia.cap.max_recv_wr = std::max<uint32_t>(depth, 1);
                Qpn n;
                if (c[s]->create_qp(ia, n)) return fail(s);
                qpn[s].push_back(n);
            }
        }
        for (int s = 0; s < 2; ++s)
            for (uint32_t q = 0; q < o.qps; ++q) {
                QpAttr a;
                a.qp_state = QpState::Init;
                a.qp_access_flags = kAllAccess;
                if (c[s]->modify_qp(qpn[s][q], a,
                                    transport::kAttrState | transport::kAttrPkeyIndex | transport::kAttrPort |
                                        transport::kAttrAccessFlags))
                    return fail(s);
                a.qp_state = QpState::Rtr;
                a.dest_qp_num = qpn[1 - s][q];
                a.rq_psn = Psn{0};
                a.path_mtu = PathMtu::Mtu4096;
                PortAttr pa;
                c[s]->query_port(1, pa);
                a.path_mtu = pa.active_mtu;
                a.max_dest_rd_atomic = 16;
                a.min_rnr_timer = 1;
                a.ah_attr.dgid = wire::IpAddr::from_v4(ip[1 - s]);
                a.ah_attr.sgid_index = static_cast<uint8_t>(c[s]->default_gid_index());
                if (c[s]->modify_qp(qpn[s][q], a,
                                    transport::kAttrState | transport::kAttrAv | transport::kAttrPathMtu |
                                        transport::kAttrDestQpn | transport::kAttrRqPsn |
                                        transport::kAttrMaxDestRdAtomic | transport::kAttrMinRnrTimer))
                    return fail(s);
                a.qp_state = QpState::Rts;
                a.sq_psn = Psn{0};
                a.max_rd_atomic = 16;
                if (c[s]->modify_qp(qpn[s][q], a,
                                    transport::kAttrState | transport::kAttrSqPsn | transport::kAttrTimeout |
                                        transport::kAttrRetryCnt | transport::kAttrRnrRetry |
                                        transport::kAttrMaxQpRdAtomic))
                    return fail(s);
            }
        posted.assign(o.qps, 0);
        done.assign(o.qps, 0);
        recvd.assign(o.qps, 0);
        return 0;
    }

    int post_recv(uint32_t q, uint64_t i) {
        Buffers& b = buf[1][q];
        RecvWr r;
        r.wr_id = static_cast<uint64_t>(q) << 48 | i;
        r.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(b.slot(static_cast<uint32_t>(i % slots), size)), size,
                                b.mr.lkey});
        return c[1]->post_recv(qpn[1][q], std::span(&r, 1)) ? fail(1) : 0;
    }

    int post(uint32_t q) {
        const uint64_t i = posted[q];
        const uint32_t k = static_cast<uint32_t>(i % slots);
        Buffers& l = buf[0][q];
        Buffers& r = buf[1][q];
        SendWr w;
        w.wr_id = static_cast<uint64_t>(q) << 48 | i;
        w.send_flags = transport::kSendSignaled;
        w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(l.slot(k, size)), size, l.mr.lkey});
        w.rkey = r.mr.rkey;
        w.remote_addr = reinterpret_cast<uint64_t>(r.slot(k, size));
        switch (o.op) {
            case PerfOp::Write: w.opcode = WrOpcode::RdmaWrite; break;
            case PerfOp::Read: w.opcode = WrOpcode::RdmaRead; break;
            case PerfOp::Send: w.opcode = WrOpcode::Send; break;
            case PerfOp::Atomic:
                w.opcode = WrOpcode::AtomicFetchAndAdd;
                w.compare_add = 1;
                w.remote_addr = reinterpret_cast<uint64_t>(r.slot(0, size));
                break;
        }
        if (c[0]->post_send(qpn[0][q], std::span(&w, 1))) return fail(0);
        ++posted[q];
        return 0;
    }

    // The receiver's bytes of message i on QP q, checked against the sender's slot.
    bool check_recv(uint32_t q, uint64_t i, uint32_t byte_len) {
        const uint32_t k = static_cast<uint32_t>(i % slots);
        return byte_len == size && std::memcmp(buf[1][q].slot(k, size), buf[0][q].slot(k, size), size) == 0;
    }
};

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())));
    return sorted[i];
}

}  // namespace

int LoopbackPerf::run(const PerfOptions& o, PerfResult& out, std::string& error) {
    Impl& m = *impl_;
    if (o.size < 1 || o.size > (1u << 30) || o.qps < 1 || o.tx_depth < 1 || (o.iters < 1 && o.duration_s <= 0)) {
        error = "size must be 1 B-1 GiB, qps, tx depth and iterations (or a duration) at least 1";
        return EINVAL;
    }
    Run r(m.ctx[0].get(), m.ctx[1].get(), o);
    if (const int e = r.setup(m.pd, m.ip)) {
        error = r.error;
        return e;
    }
    const uint32_t depth = o.latency ? 1 : o.tx_depth;
    const bool timed = o.duration_s > 0;
    const uint64_t per_qp = timed ? UINT64_MAX : o.iters;
    if (o.op == PerfOp::Send)
        for (uint32_t q = 0; q < o.qps; ++q)
            for (uint32_t i = 0; i < depth; ++i)
                if (r.post_recv(q, r.recvd[q] + i)) {
                    error = r.error;
                    return EINVAL;
                }
    std::vector<uint64_t> recv_posted(o.qps, depth);
    std::vector<double> lat;
    std::vector<Clock::time_point> posted_at(o.latency ? o.qps : 0);
    if (o.latency) lat.reserve(timed ? 1 << 20 : o.iters * o.qps);

    const Clock::time_point start = Clock::now();
    const Clock::time_point end = timed ? start + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(o.duration_s))
                                        : Clock::time_point::max();
    Clock::time_point window_start = start, last_progress = start;
    uint64_t window_msgs = 0, total = 0;
    double peak = 0;
    bool stop_posting = false;
    for (;;) {
        const Clock::time_point now = Clock::now();
        if (timed && now >= end) stop_posting = true;
        bool all_done = true;
        for (uint32_t q = 0; q < o.qps; ++q) {
            const uint64_t goal = stop_posting ? r.posted[q] : per_qp;
            while (!stop_posting && r.posted[q] < goal && r.posted[q] - r.done[q] < depth) {
                if (o.latency) posted_at[q] = Clock::now();
                if (r.post(q)) {
                    error = r.error;
                    return EINVAL;
                }
            }
            if (r.done[q] < (stop_posting ? r.posted[q] : per_qp)) all_done = false;
        }
        if (all_done) break;
        Wc wc[32];
        const int n = r.c[0]->poll_cq(r.cq[0], wc);
        const Clock::time_point t = Clock::now();
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != WcStatus::Success) {
                error = fmt::format("{} completed with {}", to_string(o.op), wc_status_str(wc[i].status));
                return EIO;
            }
            const uint32_t q = static_cast<uint32_t>(wc[i].wr_id >> 48);
            if (o.latency) lat.push_back(std::chrono::duration<double, std::micro>(t - posted_at[q]).count());
            if (o.verify && o.op == PerfOp::Read) {
                const uint64_t idx = wc[i].wr_id & ((1ull << 48) - 1);
                const uint32_t k = static_cast<uint32_t>(idx % r.slots);
                if (std::memcmp(r.buf[0][q].slot(k, r.size), r.buf[1][q].slot(k, r.size), r.size) != 0)
                    ++out.verify_errors;
            }
            ++r.done[q];
            ++total;
            ++window_msgs;
            last_progress = t;
        }
        if (o.op == PerfOp::Send) {
            const int k = r.c[1]->poll_cq(r.cq[1], wc);
            for (int i = 0; i < k; ++i) {
                const uint32_t q = static_cast<uint32_t>(wc[i].wr_id >> 48);
                const uint64_t idx = wc[i].wr_id & ((1ull << 48) - 1);
                if (wc[i].status != WcStatus::Success) {
                    error = fmt::format("RECV completed with {}", wc_status_str(wc[i].status));
                    return EIO;
                }
                if (o.verify && !r.check_recv(q, idx, wc[i].byte_len)) ++out.verify_errors;
                ++r.recvd[q];
                if (r.post_recv(q, recv_posted[q]++)) {
                    error = r.error;
                    return EINVAL;
                }
            }
        }
        if (t - window_start >= std::chrono::milliseconds(1)) {
            peak = std::max(peak, static_cast<double>(window_msgs) * r.size * 8 / seconds(t - window_start) / 1e9);
            window_start = t;
            window_msgs = 0;
        }
        if (t - last_progress > kStall) {
            error = fmt::format("no completion for 5 s ({} of {} done)", total, timed ? total : o.iters * o.qps);
            return ETIMEDOUT;
        }
    }
    const double secs = seconds(Clock::now() - start);
    out.bytes = r.size;
    out.iterations = total;
    out.bw_avg_gbps = static_cast<double>(total) * r.size * 8 / secs / 1e9;
    out.bw_peak_gbps = std::max(peak, out.bw_avg_gbps);
    out.msg_rate_mpps = static_cast<double>(total) / secs / 1e6;
    if (o.verify) {
        for (uint32_t q = 0; q < o.qps; ++q) {
            if (o.op == PerfOp::Write) {
                // Every slot was last written from the same local slot.
                const uint32_t used = static_cast<uint32_t>(std::min<uint64_t>(r.slots, r.done[q]));
                for (uint32_t k = 0; k < used; ++k)
                    if (std::memcmp(r.buf[0][q].slot(k, r.size), r.buf[1][q].slot(k, r.size), r.size) != 0)
                        ++out.verify_errors;
            } else if (o.op == PerfOp::Atomic) {
                uint64_t initial, now;
                std::memset(&initial, pattern(0, q, 1), 8);
                std::memcpy(&now, r.buf[1][q].slot(0, 8), 8);
                if (now != initial + r.done[q]) ++out.verify_errors;
            } else if (o.op == PerfOp::Send && r.recvd[q] != r.done[q]) {
                ++out.verify_errors;
            }
        }
    }
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
