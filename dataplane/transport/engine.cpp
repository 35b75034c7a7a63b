// Object management (PD, MR, CQ, SRQ, AH, QP lifetimes), posting work and
// polling completions.
#include "dataplane/transport/engine.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rocemu::transport {

namespace {

VerbsError err(int e, const char* attr, std::string msg) { return VerbsError{e, attr, std::move(msg)}; }

uint32_t pow2_at_least(uint32_t n) {
    uint32_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

constexpr const char* kDropNames[] = {
    "drop_parse_error", "drop_bad_icrc", "drop_bad_pkey", "drop_unknown_qpn", "drop_qp_state",
    "drop_wrong_qp_class", "drop_address_mismatch", "drop_not_for_us", "drop_bad_qkey", "drop_no_recv_wqe",
    "drop_uc_sequence", "drop_duplicate_in_window", "drop_out_of_window", "drop_ghost_response",
    "drop_bad_response", "drop_stale_response", "drop_resource_missing", "drop_qp_error", "drop_oversize", "drop_uc_invalid",
    "drop_split_headers", "drop_resp_queue_full",
};
static_assert(std::size(kDropNames) == static_cast<size_t>(DropReason::kCount));

constexpr const char* kWcStatusNames[] = {
    "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
    "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
    "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
    "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
};

constexpr const char* kStateNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};

}  // namespace

const char* to_string(DropReason r) {
    const auto i = static_cast<size_t>(r);
    return i < std::size(kDropNames) ? kDropNames[i] : "drop_unknown";
}
bool is_ignored_response(std::string_view counter) {
    return counter == to_string(DropReason::StaleResponse) || counter == to_string(DropReason::GhostResponse);
}
const char* to_string(WcStatus s) {
    const auto i = static_cast<size_t>(s);
    return i < std::size(kWcStatusNames) ? kWcStatusNames[i] : "UNKNOWN";
}
const char* to_string(QpState s) {
    const auto i = static_cast<size_t>(s);
    return i < std::size(kStateNames) ? kStateNames[i] : "UNKNOWN";
}

void Counters::add(const Counters& o) {
    sent_pkts += o.sent_pkts;
    rcvd_pkts += o.rcvd_pkts;
    duplicate_request += o.duplicate_request;
    out_of_seq_request += o.out_of_seq_request;
    rcvd_rnr_err += o.rcvd_rnr_err;
    send_rnr_err += o.send_rnr_err;
    rcvd_seq_err += o.rcvd_seq_err;
    ack_deferred += o.ack_deferred;
    retry_exceeded_err += o.retry_exceeded_err;
    retry_rnr_exceeded_err += o.retry_rnr_exceeded_err;
    completer_retry_err += o.completer_retry_err;
    send_err += o.send_err;
    link_downed += o.link_downed;
    rdma_sends += o.rdma_sends;
    rdma_recvs += o.rdma_recvs;
    np_cnp_sent += o.np_cnp_sent;
    rp_cnp_handled += o.rp_cnp_handled;
    np_ecn_marked_roce_packets += o.np_ecn_marked_roce_packets;
    selective_retransmits += o.selective_retransmits;
    sack_sent += o.sack_sent;
    direct_placed += o.direct_placed;
    rcvd_bytes += o.rcvd_bytes;
    for (size_t i = 0; i < drops.size(); ++i) drops[i] += o.drops[i];
}

VerbsError EngineConfig::validate() const {
    if (gids.empty()) return err(EINVAL, "gids", "gids: at least one GID is required");
    auto range = [](const char* key, uint64_t v, uint64_t lo, uint64_t hi) -> VerbsError {
        if (v < lo || v > hi) return err(EINVAL, key, fmt::format("{}: {} is outside [{}, {}]", key, v, lo, hi));
        return {};
    };
    if (auto e = range("active_mtu", static_cast<uint8_t>(active_mtu), 1, 5)) return e;
    if (auto e = range("max_qp", max_qp, 1, 1u << 20)) return e;
    if (auto e = range("max_mr", max_mr, 1, 1u << 20)) return e;
    if (auto e = range("max_cq", max_cq, 1, 1u << 20)) return e;
    if (auto e = range("max_srq", max_srq, 1, 1u << 20)) return e;
    if (auto e = range("max_ah", max_ah, 1, 1u << 20)) return e;
    if (auto e = range("max_cqe", max_cqe, 1, 1u << 22)) return e;
    if (auto e = range("max_qp_wr", max_qp_wr, 1, 1u << 20)) return e;
    if (auto e = range("max_unacked_psns", max_unacked_psns, 1, 1u << 22)) return e;
    if (auto e = range("ack_req_every", ack_req_every, 1, 1u << 20)) return e;
    if (sack_delay.v < 100 || sack_delay.v > 1000000000)
        return err(EINVAL, "sack_delay", fmt::format("sack_delay: {} ns is outside [100, 1000000000]", sack_delay.v));
    if (auto e = range("cnp_dscp", cnp_dscp, 0, 63)) return e;
    if (auto e = range("cnp_pcp", cnp_pcp, 0, 7)) return e;
    if (zero_copy_min != 0)
        if (auto e = range("zero_copy_min", zero_copy_min, FrameWriter::kFusedFrom, mtu_bytes(PathMtu::Mtu4096))) return e;
    if (min_time_between_cnps.v < 0)
        return err(EINVAL, "min_time_between_cnps",
                   fmt::format("min_time_between_cnps: {} ns is outside [0, inf)", min_time_between_cnps.v));
    return {};
}

std::unique_ptr<Engine> Engine::create(const EngineConfig& cfg, VerbsError& error) {
    error = cfg.validate();
    if (error) return nullptr;
    return std::unique_ptr<Engine>(new Engine(cfg));
}

Engine::Engine(const EngineConfig& cfg) : cfg_(cfg), rng_(cfg.rng_seed) {
    // Index 0 of every table is reserved so that handle 0 stays invalid.
    pds_.resize(1);
    mrs_.resize(1);
    cqs_.resize(1);
    srqs_.resize(1);
    ahs_.resize(1);
    mr_pins_ = std::make_unique<std::atomic<uint32_t>[]>(size_t{cfg.max_mr} + 1);
}

Engine::~Engine() {
    // Frames still in flight decrement their pins when their mbufs are freed,
    // whenever that is: the counters outlive an engine destroyed before them.
    for (uint32_t i = 0; i <= cfg_.max_mr; ++i)
        if (mr_pins_[i].load(std::memory_order_acquire)) {
            (void)mr_pins_.release();
            return;
        }
}

uint16_t Engine::rxe_udp_sport(Qpn local, Qpn remote, uint32_t flow_label) {
    uint32_t fl = flow_label & 0xFFFFF;
    if (fl == 0) {
        uint64_t v = uint64_t{local.v} * remote.v;
        v ^= v >> 20;
        v ^= v >> 40;
        fl = static_cast<uint32_t>(v & 0xFFFFF);
    }
    uint32_t low = fl & 0x3FFF;
    low ^= (fl & 0xFC000) >> 14;
    return static_cast<uint16_t>(low | 0xC000);
}

template <typename T>
static uint32_t alloc_slot(std::vector<T>& v, uint32_t max) {
    for (uint32_t i = 1; i < v.size(); ++i)
        if (!v[i].live) return i;
    if (v.size() > max) return 0;
    v.emplace_back();
    return static_cast<uint32_t>(v.size() - 1);
}

Result<PdHandle> Engine::alloc_pd() {
    const uint32_t i = alloc_slot(pds_, cfg_.max_qp * 4);
    if (i == 0) return {{}, err(ENOMEM, "pd", "no PD slots left")};
    pds_[i] = Pd{true, 0};
    return {PdHandle{i}, {}};
}

VerbsError Engine::dealloc_pd(PdHandle pd) {
    if (!pd_live(pd)) return err(EINVAL, "pd", "unknown PD");
    if (pds_[pd.id].users != 0) return err(EBUSY, "pd", "PD still in use");
    pds_[pd.id].live = false;
    return {};
}

Result<MrHandle> Engine::reg_mr(PdHandle pd, void* addr, uint64_t length, uint32_t access) {
    if (!pd_live(pd)) return {{}, err(EINVAL, "pd", "unknown PD")};
    if (access & ~uint32_t{kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic})
        return {{}, err(EINVAL, "access", fmt::format("access: 0x{:x} has unknown flags", access))};
    // IBTA o10-37: remote write or atomic access needs local write.
    if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite))
        return {{}, err(EINVAL, "access", "access: REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE")};
    if (addr == nullptr && length != 0) return {{}, err(EINVAL, "addr", "addr: null with a non-zero length")};
    return add_mr(Mr{true, pd.id, reinterpret_cast<uint64_t>(addr), length, access});
}

Result<MrHandle> Engine::alloc_null_mr(PdHandle pd) { return add_null_mr(pd, 0); }

Result<MrHandle> Engine::alloc_discard_mr(PdHandle pd) { return add_null_mr(pd, kRemoteWrite); }

Result<MrHandle> Engine::add_null_mr(PdHandle pd, uint32_t access) {
    if (!pd_live(pd)) return {{}, err(EINVAL, "pd", "unknown PD")};
    return add_mr(Mr{true, pd.id, 0, UINT64_MAX, access, 0, true});
}

Result<MrHandle> Engine::add_mr(Mr m) {
    const uint32_t i = alloc_slot(mrs_, cfg_.max_mr);
    if (i == 0 || i >= (1u << 24)) return {{}, err(ENOMEM, "mr", "no MR slots left")};
    ++key_gen_;
    m.key = i << 8 | key_gen_;
    mrs_[i] = m;
    ++pds_[m.pd].users;
    return {MrHandle{m.key, m.key}, {}};
}

VerbsError Engine::dereg_mr(MrHandle mr) {
    Mr* m = find_mr(mr.lkey);
    if (m == nullptr) return err(EINVAL, "lkey", "unknown MR");
    // As ibv_dereg_mr with memory windows still bound: the caller may free
    // the memory once this succeeds, and frames still read it.
    if (const uint32_t n = mr_pins_[mr.lkey >> 8].load(std::memory_order_acquire))
        return err(EBUSY, "lkey", fmt::format("MR has {} zero-copy frames in flight that read its memory", n));
    --pds_[m->pd].users;
    m->live = false;
    ++mr_epoch_;  // every WQE's MRs are checked again at its next packet
    return {};
}

Mr* Engine::find_mr(uint32_t key) {
    const uint32_t i = key >> 8;
    if (i == 0 || i >= mrs_.size()) return nullptr;
    Mr& m = mrs_[i];
    return m.live && m.key == key ? &m : nullptr;
}

Result<CqHandle> Engine::create_cq(uint32_t cqe) {
    if (cqe == 0 || cqe > cfg_.max_cqe)
        return {{}, err(EINVAL, "cqe", fmt::format("cqe: {} is outside [1, {}]", cqe, cfg_.max_cqe))};
    const uint32_t i = alloc_slot(cqs_, cfg_.max_cq);
    if (i == 0) return {{}, err(ENOMEM, "cq", "no CQ slots left")};
    Cq& c = cqs_[i];
    c = Cq{};
    c.live = true;
    c.ring.assign(pow2_at_least(cqe), Wc{});
    return {CqHandle{i}, {}};
}

VerbsError Engine::resize_cq(CqHandle cq, uint32_t cqe) {
    if (cq.id == 0 || cq.id >= cqs_.size() || !cqs_[cq.id].live) return err(EINVAL, "cq", "unknown CQ");
    if (cqe == 0 || cqe > cfg_.max_cqe)
        return err(EINVAL, "cqe", fmt::format("cqe: {} is outside [1, {}]", cqe, cfg_.max_cqe));
    Cq& c = cqs_[cq.id];
    const uint32_t n = pow2_at_least(cqe);
    if (n < c.size())
        return err(EINVAL, "cqe", fmt::format("cqe: {} is fewer than the {} completions waiting", cqe, c.size()));
    std::vector<Wc> ring(n);
    for (uint32_t i = 0; i < c.size(); ++i) ring[i] = c.ring[(c.head + i) & (c.ring.size() - 1)];
    c.tail = c.size();
    c.head = 0;
    c.ring.swap(ring);
    return {};
}

VerbsError Engine::destroy_cq(CqHandle cq) {
    if (cq.id == 0 || cq.id >= cqs_.size() || !cqs_[cq.id].live) return err(EINVAL, "cq", "unknown CQ");
    if (cqs_[cq.id].users != 0) return err(EBUSY, "cq", "CQ still in use");
    cqs_[cq.id] = Cq{};
    return {};
}

Result<SrqHandle> Engine::create_srq(PdHandle pd, uint32_t max_wr, uint32_t max_sge) {
    if (!pd_live(pd)) return {{}, err(EINVAL, "pd", "unknown PD")};
    if (max_wr == 0 || max_wr > cfg_.max_qp_wr)
        return {{}, err(EINVAL, "max_wr", fmt::format("max_wr: {} is outside [1, {}]", max_wr, cfg_.max_qp_wr))};
    if (max_sge == 0 || max_sge > kMaxSge)
        return {{}, err(EINVAL, "max_sge", fmt::format("max_sge: {} is outside [1, {}]", max_sge, kMaxSge))};
    const uint32_t i = alloc_slot(srqs_, cfg_.max_srq);
    if (i == 0) return {{}, err(ENOMEM, "srq", "no SRQ slots left")};
    Srq& s = srqs_[i];
    s = Srq{};
    s.live = true;
    s.pd = pd.id;
    s.max_sge = max_sge;
    s.rq.init(max_wr);
    ++pds_[pd.id].users;
    return {SrqHandle{i}, {}};
}

VerbsError Engine::destroy_srq(SrqHandle srq) {
    if (srq.id == 0 || srq.id >= srqs_.size() || !srqs_[srq.id].live) return err(EINVAL, "srq", "unknown SRQ");
    if (srqs_[srq.id].users != 0) return err(EBUSY, "srq", "SRQ still in use");
    --pds_[srqs_[srq.id].pd].users;
    srqs_[srq.id] = Srq{};
    return {};
}

Result<AhHandle> Engine::create_ah(PdHandle pd, const AddressVector& av) {
    if (!pd_live(pd)) return {{}, err(EINVAL, "pd", "unknown PD")};
    if (av.sgid_index >= cfg_.gids.size())
        return {{}, err(EINVAL, "sgid_index",
                        fmt::format("sgid_index: {} is outside [0, {}]", av.sgid_index, cfg_.gids.size() - 1))};
    const uint32_t i = alloc_slot(ahs_, cfg_.max_ah);
    if (i == 0) return {{}, err(ENOMEM, "ah", "no AH slots left")};
    ahs_[i] = Ah{true, pd.id, av};
    ++pds_[pd.id].users;
    return {AhHandle{i}, {}};
}

VerbsError Engine::destroy_ah(AhHandle ah) {
    if (ah.id == 0 || ah.id >= ahs_.size() || !ahs_[ah.id].live) return err(EINVAL, "ah", "unknown AH");
    --pds_[ahs_[ah.id].pd].users;
    ahs_[ah.id].live = false;
    return {};
}

Result<Qpn> Engine::create_qp(const QpInitAttr& in) {
    if (!pd_live(in.pd)) return {{}, err(EINVAL, "pd", "unknown PD")};
    auto cq_ok = [&](CqHandle c) { return c.id != 0 && c.id < cqs_.size() && cqs_[c.id].live; };
    if (!cq_ok(in.send_cq)) return {{}, err(EINVAL, "send_cq", "unknown send CQ")};
    if (!cq_ok(in.recv_cq)) return {{}, err(EINVAL, "recv_cq", "unknown recv CQ")};
    if (in.srq.id != 0 && (in.srq.id >= srqs_.size() || !srqs_[in.srq.id].live))
        return {{}, err(EINVAL, "srq", "unknown SRQ")};
    const QpCap& c = in.cap;
    auto range = [](const char* key, uint64_t v, uint64_t lo, uint64_t hi) -> VerbsError {
        if (v < lo || v > hi) return err(EINVAL, key, fmt::format("{}: {} is outside [{}, {}]", key, v, lo, hi));
        return {};
    };
    if (auto e = range("cap.max_send_wr", c.max_send_wr, 1, cfg_.max_qp_wr)) return {{}, e};
    // With an SRQ there is no receive queue of the QP's own to size (ibverbs ignores these then).
    if (in.srq.id == 0) {
        if (auto e = range("cap.max_recv_wr", c.max_recv_wr, 1, cfg_.max_qp_wr)) return {{}, e};
        if (auto e = range("cap.max_recv_sge", c.max_recv_sge, 1, kMaxSge)) return {{}, e};
    }
    if (auto e = range("cap.max_send_sge", c.max_send_sge, 1, kMaxSge)) return {{}, e};
    if (auto e = range("cap.max_inline_data", c.max_inline_data, 0, 4096)) return {{}, e};
    if (const uint32_t r = in.resp_queue; r < 1 || r > 4096 || (r & (r - 1)) != 0)
        return {{}, err(EINVAL, "resp_queue", fmt::format("resp_queue: {} is not a power of two in [1, 4096]", r))};
    if (in.qp_type == QpType::Rc && in.reliability == Reliability::Spray) {
        if (auto e = range("spray_paths", in.spray_paths, 1, 16)) return {{}, e};
        const uint32_t w = in.reorder_window;
        if (w < 16 || w > 4096 || (w & (w - 1)) != 0)
            return {{}, err(EINVAL, "reorder_window",
                            fmt::format("reorder_window: {} is not a power of two in [16, 4096]", w))};
    }
    if (qp_count_ >= cfg_.max_qp) return {{}, err(ENOMEM, "qp", "max_qp reached")};

    uint32_t slot = 0;
    while (slot < qps_.size() && qps_[slot]) ++slot;
    if (slot == qps_.size()) {
        qps_.emplace_back();
        sched_.resize(static_cast<uint32_t>(qps_.size()));
    }
    auto qp = std::make_unique<Qp>();
    Qp& q = *qp;
    q.live = true;
    q.qpn = Qpn{kFirstQpn + slot};
    q.type = in.qp_type;
    q.init = in;
    q.mtu = mtu_bytes(cfg_.active_mtu);
    q.sq.assign(pow2_at_least(c.max_send_wr), SendWqe{});
    q.inline_buf.assign(size_t{q.sq.size()} * c.max_inline_data, 0);
    if (in.srq.id == 0) q.rq.init(c.max_recv_wr);
    q.out.assign(in.resp_queue, RespItem{});
    if (q.spraying()) {
        q.rexmit.assign(in.reorder_window, Psn{});
        q.rexmit_pending.init(in.reorder_window);
        q.read_rcvd.init(in.reorder_window);
        q.psn_path.assign(in.reorder_window, 0);
        q.ooo.init(in.reorder_window);
        q.held_slots = in.reorder_window;
        q.reorder = SparseBuffer(Qp::reorder_bytes(in.reorder_window));
    }
    ++pds_[in.pd.id].users;
    ++cqs_[in.send_cq.id].users;
    ++cqs_[in.recv_cq.id].users;
    if (in.srq.id != 0) ++srqs_[in.srq.id].users;
    reset_qp(q);
    qps_[slot] = std::move(qp);
    touch(slot);
    ++qp_count_;
    return {q.qpn, {}};
}

VerbsError Engine::destroy_qp(Qpn qpn) {
    Qp* q = find_qp(qpn);
    if (q == nullptr) return err(EINVAL, "qp", "unknown QP");
    --pds_[q->init.pd.id].users;
    --cqs_[q->init.send_cq.id].users;
    --cqs_[q->init.recv_cq.id].users;
    if (q->init.srq.id != 0) --srqs_[q->init.srq.id].users;
    qps_[qpn.v - kFirstQpn].reset();
    touch(qpn.v - kFirstQpn);
    --qp_count_;
    return {};
}

Qp* Engine::find_qp(Qpn qpn) {
    if (qpn.v < kFirstQpn) return nullptr;
    const uint32_t i = qpn.v - kFirstQpn;
    if (i >= qps_.size()) return nullptr;
    // Whoever looks a QP up may change it: its times are recomputed.
    touch(i);
    return qps_[i].get();
}
const Qp* Engine::find_qp(Qpn qpn) const { return const_cast<Engine*>(this)->find_qp(qpn); }

const Counters* Engine::qp_counters(Qpn qpn) const {
    const Qp* q = find_qp(qpn);
    return q ? &q->counters : nullptr;
}

void Engine::on_link_state(bool up) {
    if (!up) ++counters_.link_downed;
}

void Engine::set_next_send(Qpn qpn, Nanos t) {
    if (Qp* q = find_qp(qpn)) {
        q->next_send = t;
        q->gate_armed = true;
    }
}

void Engine::drop(Qp* qp, DropReason r) {
    ++counters_.drops[static_cast<size_t>(r)];
    if (qp != nullptr) ++qp->counters.drops[static_cast<size_t>(r)];
}

void Engine::notify_cq(uint32_t cq, Effects& fx) {
    for (const CqHandle& h : fx.cq_events)
        if (h.id == cq) return;
    fx.cq_events.push_back(CqHandle{cq});
}

// For the per-message completions: the caller writes the entry in the CQ's
// ring, since a Wc built on the stack and copied stalls on store forwarding.
Wc* Engine::complete_slot(uint32_t cq, Effects& fx) {
    notify_cq(cq, fx);
    Wc* wc = cqs_[cq].next();
    if (wc != nullptr) *wc = Wc{};
    return wc;
}

void Engine::complete(Qp& qp, uint32_t cq, const Wc& wc, Effects& fx) {
    (void)qp;
    cqs_[cq].push(wc);
    notify_cq(cq, fx);
}

VerbsError Engine::post_send(Qpn qpn, std::span<const SendWr> wrs, Effects& fx, size_t* bad_wr) {
    Qp* qp = find_qp(qpn);
    if (qp == nullptr) return err(EINVAL, "qp", "unknown QP");
    for (size_t k = 0; k < wrs.size(); ++k) {
        const SendWr& wr = wrs[k];
        auto fail = [&](int e, const char* attr, const char* msg) {
            if (bad_wr) *bad_wr = k;
            return err(e, attr, msg);
        };
        if (qp->state == QpState::Reset || qp->state == QpState::Init || qp->state == QpState::Rtr)
            return fail(EINVAL, "qp_state", "post_send needs RTS, SQD, SQE or ERR");
        if (qp->sq_head - qp->sq_comp >= qp->init.cap.max_send_wr) return fail(ENOMEM, "sq", "send queue full");
        if (wr.sg_list.size() > qp->init.cap.max_send_sge)
            return fail(EINVAL, "num_sge", "more SGEs than cap.max_send_sge");
        const bool rdma = wr.opcode == WrOpcode::RdmaWrite || wr.opcode == WrOpcode::RdmaWriteWithImm ||
                          wr.opcode == WrOpcode::RdmaRead;
        const bool atomic = wr.opcode == WrOpcode::AtomicCmpAndSwp || wr.opcode == WrOpcode::AtomicFetchAndAdd;
        if (qp->type == QpType::Ud && (rdma || atomic)) return fail(EINVAL, "opcode", "UD QPs only SEND");
        if (qp->type == QpType::Uc && (wr.opcode == WrOpcode::RdmaRead || atomic))
            return fail(EINVAL, "opcode", "UC QPs do not support READ or atomics");
        if (qp->type == QpType::Ud && (wr.ah.id == 0 || wr.ah.id >= ahs_.size() || !ahs_[wr.ah.id].live))
            return fail(EINVAL, "ah", "unknown AH");
        uint64_t len = 0;
        for (const Sge& s : wr.sg_list) len += s.length;
        const bool inl = (wr.send_flags & kSendInline) && !(wr.opcode == WrOpcode::RdmaRead || atomic);
        if (inl && len > qp->init.cap.max_inline_data)
            return fail(EINVAL, "max_inline_data", "inline data longer than cap.max_inline_data");
        if (len > (1ull << 31)) return fail(EINVAL, "length", "message longer than 2 GiB");
        if (qp->type == QpType::Ud && len > qp->mtu) return fail(EINVAL, "length", "UD message longer than the MTU");
        if (atomic && (wr.sg_list.size() != 1 || len != 8))
            return fail(EINVAL, "sg_list", "atomics need one 8-byte SGE");

        const uint32_t slot = qp->sq_head;
        SendWqe& w = qp->wqe(slot);
        // Reset from a constant: a SendWqeState{} built on the stack and
        // copied stalls on store forwarding (half of post_send in perf).
        static constexpr SendWqeState kFresh{};
        static_cast<SendWqeState&>(w) = kFresh;
        w.wr = wr;
        w.length = len;
        if (qp->init.sq_sig_all) w.wr.send_flags |= kSendSignaled;
        if (inl) {
            // Inline data is copied now, as ibverbs does, so the caller may reuse its buffers.
            uint8_t* dst = qp->inline_buf.data() + size_t{slot & (qp->sq.size() - 1)} * qp->init.cap.max_inline_data;
            uint64_t off = 0;
            for (const Sge& s : wr.sg_list) {
                if (s.length) std::memcpy(dst + off, reinterpret_cast<const void*>(s.addr), s.length);
                off += s.length;
            }
            w.is_inline = true;
            w.wr.sg_list.clear();
            w.wr.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(dst), static_cast<uint32_t>(len), 0});
        }
        ++qp->sq_head;
        if (qp->state == QpState::Err) flush(*qp, fx);
    }
    return {};
}

VerbsError Engine::post_recv(Qpn qpn, std::span<const RecvWr> wrs, Effects& fx, size_t* bad_wr) {
    Qp* qp = find_qp(qpn);
    if (qp == nullptr) return err(EINVAL, "qp", "unknown QP");
    if (qp->init.srq.id != 0) return err(EINVAL, "srq", "QP uses an SRQ: post to the SRQ");
    for (size_t k = 0; k < wrs.size(); ++k) {
        if (qp->state == QpState::Reset) {
            if (bad_wr) *bad_wr = k;
            return err(EINVAL, "qp_state", "post_recv needs INIT or later");
        }
        if (qp->rq.size() >= qp->init.cap.max_recv_wr || wrs[k].sg_list.size() > qp->init.cap.max_recv_sge) {
            if (bad_wr) *bad_wr = k;
            return err(ENOMEM, "rq", "receive queue full or too many SGEs");
        }
        qp->rq.push(wrs[k]);
    }
    if (qp->state == QpState::Err) flush(*qp, fx);
    // A RECV may end an RNR wait on the peer; nothing to send from here.
    return {};
}

VerbsError Engine::post_srq_recv(SrqHandle srq, std::span<const RecvWr> wrs, size_t* bad_wr) {
    if (srq.id == 0 || srq.id >= srqs_.size() || !srqs_[srq.id].live) return err(EINVAL, "srq", "unknown SRQ");
    Srq& s = srqs_[srq.id];
    for (size_t k = 0; k < wrs.size(); ++k) {
        if (s.rq.full() || wrs[k].sg_list.size() > s.max_sge) {
            if (bad_wr) *bad_wr = k;
            return err(ENOMEM, "srq", "SRQ full or too many SGEs");
        }
        s.rq.push(wrs[k]);
    }
    return {};
}

uint32_t Engine::poll_cq(CqHandle cq, std::span<Wc> out) {
    if (cq.id == 0 || cq.id >= cqs_.size() || !cqs_[cq.id].live) return 0;
    Cq& c = cqs_[cq.id];
    uint32_t n = 0;
    while (n < out.size() && c.head != c.tail) out[n++] = c.ring[c.head++ & (c.ring.size() - 1)];
    return n;
}

}  // namespace rocemu::transport
