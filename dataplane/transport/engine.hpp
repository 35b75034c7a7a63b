// The RoCEv2 transport engine: one emulated RDMA device.
//
// A pure object: no threads, no clock reads, no I/O, no DPDK. Inputs are
// received Ethernet frames (on_frame), timer expiries (on_timer) and verbs
// calls (post_send, post_recv, modify_qp, ...), each with `now`. Outputs are
// written into a caller-owned Effects (CQs with new entries, CNPs received,
// when the next timer is due) and into caller-owned frame buffers that the
// caller pulls with tx_burst. The DPDK runtime, the virtual-time simulator
// and the tests all drive this same object.
//
// The verbs side is shaped like ibverbs: objects are created and destroyed by
// handle, QPs are moved through RESET/INIT/RTR/RTS with modify_qp and an
// attribute mask, and errors name the attribute at fault.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/fixed_vec.hpp"
#include "common/rng.hpp"
#include "dataplane/transport/objects.hpp"
#include "dataplane/transport/qp.hpp"
#include "dataplane/transport/sched.hpp"
#include "dataplane/transport/sgl.hpp"
#include "dataplane/transport/types.hpp"
#include "dataplane/wire/header_template.hpp"
#include "dataplane/wire/icrc.hpp"

namespace rocemu::transport {

struct EngineConfig {
    wire::MacAddr mac;
    std::vector<wire::IpAddr> gids;  // GID table; an AV's sgid_index selects the source
    PathMtu active_mtu = PathMtu::Mtu1024;  // port MTU; UD QPs use it (rxe: 1024 on a 1500-byte netdev)
    uint32_t max_qp = 1024;
    uint32_t max_mr = 4096;
    uint32_t max_cq = 1024;
    uint32_t max_srq = 256;
    uint32_t max_ah = 4096;
    uint32_t max_cqe = 65536;
    uint32_t max_qp_wr = 16384;
    uint32_t max_unacked_psns = 128;  // requester window, as rxe's RXE_MAX_UNACKED_PSNS
    uint32_t ack_req_every = 64;      // AckReq at least every N packets (rxe RXE_MAX_PKT_PER_ACK)
    // rxe answers every AckReq packet with its own ACK; when true, interop
    // QPs merge ACKs that have not left yet (spraying QPs always merge).
    bool coalesce_acks = false;
    // Spraying: a hole in the reorder window is reported (selective NAK)
    // only once it has stayed open this long; reordering that resolves
    // sooner causes no NAK. Set it above the paths' delay skew.
    Nanos sack_delay{16000};
    uint8_t cnp_dscp = 48;
    uint8_t cnp_pcp = 6;
    Nanos min_time_between_cnps{4000};
    uint64_t rng_seed = 1;  // spraying's random path choice
    // WRITE payload into an MR up to this size is placed with plain stores:
    // such an MR stays in cache, where a NIC's DDIO writes land too. A larger
    // one is written with streaming stores, which spare cold memory the read
    // for ownership (one 4 KiB frame through 8 MiB, last-level cache: 146-167
    // ns plain, 282-289 streaming; through 128 MiB: 472-482 and 415-445;
    // rocemu_pass_bench, dataplane/dpdk/README.md).
    uint64_t cached_write_max = 4u << 20;
    // Request payload of at least this many bytes that lies in one SGE, and
    // READ response payload of at least this many bytes, is
    // not copied into the frame: the frame lends the MR's bytes
    // (TxFrame::ext), read once for the ICRC, and the runtime sends them as a
    // segment of their own. 0 (the default): always copied, as the
    // simulator and runtimes whose ports cannot send chains need. At least
    // FrameWriter::kFusedFrom when set.
    uint32_t zero_copy_min = 0;

    // Empty on success; else names the key, the value and the allowed range.
    VerbsError validate() const;
};

// Delay of an RNR NAK timer code (IBTA table 45; code 0 is 655.36 ms).
Nanos rnr_timer_delay(uint8_t code);

template <typename T>
struct Result {
    T value{};
    VerbsError error;
    bool ok() const { return error.err == 0; }
};

// What an input caused, for the caller to act on.
struct Effects {
    FixedVec<CqHandle, 64> cq_events;  // CQs that received new entries
    FixedVec<Qpn, 64> cnp_received;    // local QPs named by a received CNP (feed cc's on_cnp)
    void clear() {
        cq_events.clear();
        cnp_received.clear();
    }
};

// A frame received in several segments (an mbuf chain), in order.
using FrameSegs = std::span<const std::span<const uint8_t>>;

// Calls f(piece, n, pos) for the bytes [from, from + len) of a chain, one
// contiguous piece at a time, pos counted from `from`; stops when f returns
// false, and returns whether every call returned true.
template <typename F>
bool for_each_piece(FrameSegs segs, size_t from, size_t len, F&& f) {
    size_t pos = 0;
    for (const std::span<const uint8_t> s : segs) {
        if (len == pos) break;
        if (from >= s.size()) {
            from -= s.size();
            continue;
        }
        const size_t n = std::min(s.size() - from, len - pos);
        if (!f(s.data() + from, n, pos)) return false;
        pos += n;
        from = 0;
    }
    return true;
}

// One caller-owned frame buffer for tx_burst (capacity >= 9216 bytes).
struct TxFrame {
    std::span<uint8_t> buf;
    uint32_t len = 0;  // filled by the engine
    Qpn qpn;           // the local QP that produced the frame
    bool data = false; // a request or READ response (paced), not an ACK/NAK/CNP
    // Zero copy (EngineConfig::zero_copy_min): buf holds only the headers
    // (len bytes), the payload is the ext_len bytes at ext, inside an MR,
    // and the frame ends with the tail_len bytes of pad and ICRC in tail.
    // The engine counted the frame in *pin; the runtime takes one off
    // (release order) once nothing reads ext any more, and dereg_mr refuses
    // the MR (EBUSY) until every such frame is gone. Null ext: a whole frame.
    const uint8_t* ext = nullptr;
    uint32_t ext_len = 0;
    std::atomic<uint32_t>* pin = nullptr;
    uint8_t tail[8] = {};
    uint8_t tail_len = 0;
    // In: the caller makes a payload of zeros zero itself, cheaper than the
    // engine could (the virtual-time fabric's frame pool knows which of its
    // bytes already are). A SEND or WRITE packet whose payload comes whole
    // from null MRs (Engine::alloc_null_mr) then leaves it unwritten:
    // bytes [zeros_off, zeros_off + zeros_len) of buf are part of the frame,
    // counted in len and the ICRC as zeros, and hold whatever buf held.
    // Out: zeros_len 0 when the engine wrote every byte of the frame.
    bool defer_zeros = false;
    uint16_t zeros_off = 0;
    uint16_t zeros_len = 0;

    // The frame's size on the wire, zero copy or not: what pacing and byte
    // counters count (len alone is only the headers of a zero-copy frame).
    uint32_t wire_len() const { return len + ext_len + tail_len; }
};

class Engine {
public:
    static constexpr uint32_t kFirstQpn = 0x11;  // as rxe
    // Room for the longest frame the engine builds (wire::kMaxRoceFrame, 4198 bytes).
    static constexpr uint32_t kMinTxBuf = wire::kMaxRoceFrame;

    // The config must pass validate(); `error` says why not.
    static std::unique_ptr<Engine> create(const EngineConfig& cfg, VerbsError& error);
    ~Engine();
    // Never copied or moved: the runtimes hold it by pointer (see README, Invariants).
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // ---- verbs (control path: may allocate) ----
    Result<PdHandle> alloc_pd();
    VerbsError dealloc_pd(PdHandle pd);
    Result<MrHandle> reg_mr(PdHandle pd, void* addr, uint64_t length, uint32_t access);
    // ibv_alloc_null_mr: an MR with no memory behind it, for payload whose
    // bytes do not matter. A SEND or WRITE gathers zeros from its SGEs (any
    // address, any length), and the engine computes their ICRC without
    // reading them. It is a source only: it grants no local write (a
    // receive, READ or atomic result naming it completes with LocProtErr)
    // and no remote access (its rkey is refused like any other without
    // access). dereg_mr frees it.
    Result<MrHandle> alloc_null_mr(PdHandle pd);
    // An emulator extension for sinks whose bytes nobody reads (the
    // virtual-time fabric's RC flows): a null MR whose rkey grants remote
    // write. A WRITE into it is checked as any other (rkey, PD, length, PSN,
    // ICRC) and acknowledged, and its payload is discarded, as a null MR
    // discards what is written through its lkey on mlx5. Locally it is a null
    // MR: a source of zeros, no local write. dereg_mr frees it.
    Result<MrHandle> alloc_discard_mr(PdHandle pd);
    VerbsError dereg_mr(MrHandle mr);
    Result<CqHandle> create_cq(uint32_t cqe);
    VerbsError destroy_cq(CqHandle cq);
    // ibv_resize_cq: room for at least `cqe` completions (rounded up to a
    // power of two), keeping those waiting in order; EINVAL if fewer than
    // wait. Not a fast-path call: it allocates.
    VerbsError resize_cq(CqHandle cq, uint32_t cqe);
    Result<SrqHandle> create_srq(PdHandle pd, uint32_t max_wr, uint32_t max_sge);
    VerbsError destroy_srq(SrqHandle srq);
    Result<AhHandle> create_ah(PdHandle pd, const AddressVector& av);
    VerbsError destroy_ah(AhHandle ah);
    Result<Qpn> create_qp(const QpInitAttr& init);
    VerbsError modify_qp(Qpn qpn, const QpAttr& attr, uint32_t mask, Effects& fx);
    VerbsError query_qp(Qpn qpn, QpAttr& attr, QpInitAttr& init) const;
    VerbsError destroy_qp(Qpn qpn);

    // ---- work (fast path: no allocation) ----
    // Posts WRs in order; stops at the first bad one and reports its index.
    VerbsError post_send(Qpn qpn, std::span<const SendWr> wrs, Effects& fx, size_t* bad_wr = nullptr);
    VerbsError post_recv(Qpn qpn, std::span<const RecvWr> wrs, Effects& fx, size_t* bad_wr = nullptr);
    VerbsError post_srq_recv(SrqHandle srq, std::span<const RecvWr> wrs, size_t* bad_wr = nullptr);
    // Moves up to out.size() completions out of the CQ; returns how many.
    uint32_t poll_cq(CqHandle cq, std::span<Wc> out);

    // ---- I/O ----
    // `zero_from`: the caller knows that bytes [zero_from, frame.size() - 4)
    // are zero (the virtual-time fabric's frame pool does). A payload that
    // lies there is not read: its ICRC share is computed, and a WRITE
    // placed into memory writes zeros. SIZE_MAX (the default): nothing
    // known, every byte read.
    void on_frame(std::span<const uint8_t> frame, Nanos now, Effects& fx, size_t zero_from = SIZE_MAX);
    // The same for a frame received as a chain of segments: every header
    // must lie in the first (else a split_headers drop); payload, pad and
    // ICRC may be split anywhere after. The payload is checked and placed
    // piece by piece, never gathered into one buffer first.
    void on_frame_chain(FrameSegs segs, Nanos now, Effects& fx);
    void on_timer(Nanos now, Effects& fx);
    // When on_timer is next needed (retransmit, RNR wait, pacing gate);
    // Nanos::max() when nothing is pending.
    Nanos next_timer() const;
    // Fills up to frames.size() buffers: ACKs/NAKs/CNPs first, then requests
    // and READ responses, round-robin across QPs, honouring each QP's pacing
    // gate. Returns the number filled; a buffer smaller than kMinTxBuf ends
    // the burst.
    uint32_t tx_burst(std::span<TxFrame> frames, Nanos now, Effects& fx);
    bool tx_pending(Nanos now) const;

    // The port's carrier went down or up. Only counted (link_downed): QPs
    // keep their state and recover through their timers, as in rxe.
    void on_link_state(bool up);

    // Congestion-control hook: data packets of this QP wait until `t`.
    void set_next_send(Qpn qpn, Nanos t);

    const Counters& counters() const { return counters_; }
    const Counters* qp_counters(Qpn qpn) const;
    const EngineConfig& config() const { return cfg_; }

    // UDP source port rxe derives from the QPNs (rdma_get_udp_sport with a
    // zero flow label).
    static uint16_t rxe_udp_sport(Qpn local, Qpn remote, uint32_t flow_label = 0);

private:
    explicit Engine(const EngineConfig& cfg);

    Qp* find_qp(Qpn qpn);
    const Qp* find_qp(Qpn qpn) const;
    bool pd_live(PdHandle pd) const { return pd.id != 0 && pd.id < pds_.size() && pds_[pd.id].live; }
    Mr* find_mr(uint32_t key);
    // reg_mr, alloc_null_mr and alloc_discard_mr, once checked: `m` in a free slot, its key
    // made, its PD counting it.
    Result<MrHandle> add_mr(Mr m);
    // A null MR on `pd` granting `access` (0: alloc_null_mr; kRemoteWrite: alloc_discard_mr).
    Result<MrHandle> add_null_mr(PdHandle pd, uint32_t access);
    // Zero copy: `f` carries `len` bytes at `bytes` of the MR whose key is
    // `key` as they lie (TxFrame::ext), and the MR is pinned until the
    // runtime frees the frame. The caller writes the tail (pad, ICRC).
    void lend(TxFrame& f, const uint8_t* bytes, uint32_t len, uint32_t key) {
        f.ext = bytes;
        f.ext_len = len;
        f.pin = &mr_pins_[key >> 8];
        f.pin->fetch_add(1, std::memory_order_relaxed);
    }
    // Whether a received frame's destination address is one of our GIDs.
    bool local_gid(const wire::IpAddr& a) const {
        for (const wire::IpAddr& g : cfg_.gids)
            if (g == a) return true;
        return false;
    }
    void drop(Qp* qp, DropReason r);
    // recv.cpp: the ICRC state over a received frame's headers (l3 to the
    // payload), and what follows a passed ICRC check.
    uint32_t rx_header_state(const uint8_t* l3, size_t hdr, bool v6);
    void rx_deliver(wire::RocePacket& p, bool placed, Nanos now, Effects& fx);
    // Calls f(src, n, pos) for each contiguous piece of a received packet's
    // payload: one call for a flat frame or a held packet, one per segment
    // for the chained frame being received, whose payload is null.
    template <typename F>
    bool for_payload(const wire::RocePacket& p, F&& f) const {
        if (p.payload || !p.payload_len) return f(p.payload, size_t{p.payload_len}, size_t{0});
        return for_each_piece(rx_segs_, rx_pay_off_, p.payload_len, f);
    }
    // A received packet's payload into host memory at `va` (WRITE), or into
    // a scatter/gather list from byte `off` (READ responses).
    void place_payload(const wire::RocePacket& p, uint64_t va, bool cached) const {
        for_payload(p, [&](const uint8_t* b, size_t n, size_t pos) {
            place(reinterpret_cast<uint8_t*>(va + pos), b, n, cached);
            return true;
        });
    }
    void scatter_payload(const wire::RocePacket& p, const SgeList& sgl, uint64_t off) const {
        for_payload(p, [&](const uint8_t* b, size_t n, size_t pos) {
            sgl_scatter(sgl, off + pos, b, static_cast<uint32_t>(n));
            return true;
        });
    }
    void notify_cq(uint32_t cq, Effects& fx);
    void complete(Qp& qp, uint32_t cq, const Wc& wc, Effects& fx);
    Wc* complete_slot(uint32_t cq, Effects& fx);

    // qp_state.cpp
    VerbsError check_modify(const Qp& qp, const QpAttr& attr, uint32_t mask) const;
    void apply_modify(Qp& qp, const QpAttr& attr, uint32_t mask, Effects& fx);
    void enter_error(Qp& qp, Effects& fx);
    void flush(Qp& qp, Effects& fx);
    void reset_qp(Qp& qp);

    // req.cpp
    bool req_ready(const Qp& qp, Nanos now) const;
    bool req_build(Qp& qp, TxFrame& f, Nanos now, Effects& fx);
    bool req_build_packet(Qp& qp, SendWqe& w, uint32_t pkt, TxFrame& f, uint16_t sport);
    bool req_check_local(Qp& qp, SendWqe& w);
    void req_rewind(Qp& qp, Psn psn);
    uint16_t req_pick_path(Qp& qp, Psn psn);

    // comp.cpp
    void comp_rx(Qp& qp, const wire::RocePacket& p, Nanos now, Effects& fx);
    void comp_complete_wqe(Qp& qp, SendWqe& w, WcStatus st, Effects& fx);
    void comp_retry(Qp& qp, Psn from, Nanos now, Effects& fx);
    void comp_progress(Qp& qp, Nanos now, Effects& fx);
    bool comp_ack_upto(Qp& qp, Psn psn, Nanos now, Effects& fx);
    void comp_error(Qp& qp, SendWqe& w, WcStatus st, Effects& fx);
    void comp_local_error(Qp& qp, Effects& fx);
    void comp_timers(Qp& qp, Nanos now, Effects& fx);
    void comp_read_spray(Qp& qp, const wire::RocePacket& p, Nanos now, Effects& fx);
    void comp_read_drain(Qp& qp, Nanos now, Effects& fx);
    void comp_spray_settle(Qp& qp, Nanos now, Effects& fx);

    // resp.cpp
    void resp_rx(Qp& qp, const wire::RocePacket& p, bool placed, Nanos now, Effects& fx);
    Qp* resp_place_target(const wire::RocePacket& p, uint8_t*& dst, bool& staged);
    void resp_execute(Qp& qp, const wire::RocePacket& p, bool placed, Nanos now, Effects& fx);
    void resp_duplicate(Qp& qp, const wire::RocePacket& p);
    void resp_nak(Qp& qp, uint8_t syndrome, Psn psn, Effects& fx);
    RespItem* resp_slot(Qp& qp, RespItem::Kind kind);
    bool resp_queue(Qp& qp, const RespItem& it);
    void resp_ack(Qp& qp, Psn psn, const wire::RocePacket& p);
    bool resp_build(Qp& qp, TxFrame& f);
    void resp_uc(Qp& qp, const wire::RocePacket& p, Effects& fx);
    void resp_ud(Qp& qp, const wire::RocePacket& p, Effects& fx);
    bool resp_take_recv(Qp& qp, RecvWqe& out);
    bool resp_scatter(Qp& qp, const RecvWqe& w, uint64_t offset, const uint8_t* src, uint32_t len);
    void resp_spray_rx(Qp& qp, const wire::RocePacket& p, bool placed, Nanos now, Effects& fx);
    void resp_spray_drain(Qp& qp, Nanos now, Effects& fx);
    void resp_timers(Qp& qp, Nanos now);

    // tx.cpp
    wire::RocePacket& tx_packet(const AddressVector& av, uint16_t sport, const wire::HeaderTemplate* tpl = nullptr);
    static bool encode_headers(wire::HeaderTemplate* tpl, const wire::RocePacket& p, std::span<uint8_t> out,
                               wire::EncodeLayout& lay);
    bool build_cnp(Qp& qp, TxFrame& f);

    EngineConfig cfg_;
    Rng rng_;
    Counters counters_;
    uint16_t ip_id_ = 0;
    std::vector<Pd> pds_;
    std::vector<Mr> mrs_;
    // Zero-copy frames in flight per MR index (TxFrame::pin); released by
    // whichever thread frees the last mbuf that reads the MR.
    std::unique_ptr<std::atomic<uint32_t>[]> mr_pins_;
    std::vector<Cq> cqs_;
    std::vector<Srq> srqs_;
    std::vector<Ah> ahs_;
    std::vector<std::unique_ptr<Qp>> qps_;  // index = qpn - kFirstQpn
    // When each QP slot next has something for next_timer, tx_pending,
    // on_timer and tx_burst to do (sched.hpp): find_qp and create_qp mark a
    // slot, and so do on_timer and tx_burst for each QP they act on; sync()
    // recomputes the marked ones (times()) before the tree is read. A QP
    // changes only through find_qp, tx_burst and on_timer, so an unmarked
    // slot's times are its QP's (checked in debug builds: check_sched()).
    mutable QpSched sched_;
    void touch(std::size_t slot) const { sched_.mark(static_cast<uint32_t>(slot)); }
    QpSched::Times times(const Qp& q) const;
    QpSched::Times slot_times(uint32_t slot) const;  // times() of the slot's QP; never due when it has none
    void sync() const {
        if (sched_.marked_any()) flush_sched();
#if !defined(NDEBUG) || defined(ROCEMU_TRANSPORT_CHECKS)
        check_sched();
#endif
    }
    void flush_sched() const;
    void check_sched() const;
    uint32_t qp_count_ = 0;
    uint32_t ctl_rr_ = 0;   // tx_burst's round robins: the slot after the last QP that sent control,
    uint32_t data_rr_ = 0;  // and data
    uint8_t key_gen_ = 0;
    uint64_t mr_epoch_ = 1;  // dereg_mr calls so far, plus one (SendWqeState::mr_epoch)
    wire::RocePacket rx_pkt_, tx_pkt_;  // scratch: the frame being parsed, the frame being built
    wire::AckIcrc rx_ack_icrc_;
    wire::RxIcrc rx_icrc_;  // every other received IPv4 frame
    const uint8_t* rx_l3_ = nullptr;  // the L3 header of the frame being received
    // The chained frame being received, when its payload spans segments.
    FrameSegs rx_segs_;
    size_t rx_pay_off_ = 0;
};

}  // namespace rocemu::transport
