// Internal state of one queue pair, split the way rxe splits it: the
// requester (send queue, PSN assignment, retry), the completer (ACK and
// response handling, the retransmit timer) and the responder (expected PSN,
// message in progress, saved READ/atomic state, the ACK queue). Every buffer
// is sized at create_qp; nothing grows per packet.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "common/sparse_buffer.hpp"
#include "dataplane/transport/objects.hpp"
#include "dataplane/transport/reorder.hpp"
#include "dataplane/transport/types.hpp"
#include "dataplane/wire/header_template.hpp"

namespace rocemu::transport {

// What the requester and completer track for a WQE, apart from the WR
// itself, so that posting resets it without rebuilding the whole WQE.
static_assert(kMaxSge <= 8, "SendWqeState::null_sges has a bit per SGE");

struct SendWqeState {
    uint64_t length = 0;
    Psn first_psn;
    Psn last_psn;
    uint32_t npkts = 1;     // PSNs the WQE consumes (READ: its response packets)
    bool psn_assigned = false;
    bool is_inline = false;
    bool local_error = false;   // failed local checks: completes with `error`
    uint8_t null_sges = 0;      // bit i: SGE i is in a null MR or empty (req_check_local)
    WcStatus error = WcStatus::Success;
    uint32_t resp_pkts = 0;  // READ: response packets received in order
    // Engine::mr_epoch_ when req_check_local last passed: while no MR has
    // been deregistered since, the check would pass again (0: never checked).
    uint64_t mr_epoch = 0;
};

struct SendWqe : SendWqeState {
    SendWr wr;
};

// Saved state of an executed READ or atomic, for duplicate requests.
struct RespResource {
    enum class Kind : uint8_t { None, Read, Atomic } kind = Kind::None;
    Psn first_psn;
    Psn last_psn;
    uint64_t orig = 0;  // atomic: value before the operation
};

// One queued responder output, kept in PSN order so a later ACK never
// overtakes an earlier READ response or atomic ACK.
struct RespItem {
    enum class Kind : uint8_t { Ack, Nak, ReadResp, AtomicAck } kind = Kind::Ack;
    uint8_t syndrome = 0;
    Psn psn;      // ACK/NAK/atomic: BTH PSN. READ: PSN of the first response
    uint32_t msn = 0;
    uint32_t rkey = 0;  // READ: the MR its responses may lend (Engine::resp_build)
    uint64_t orig = 0;  // atomic ACK: the value before the operation
    // READ response progress.
    uint64_t va = 0;
    uint32_t length = 0;
    uint32_t npkts = 1;
    uint32_t next_pkt = 0;
    bool ce_echo = false;  // spraying: the acknowledged packet was ECN-CE marked
    uint16_t sport = 0;    // spraying: echo the path of the acknowledged packet
};

// Bytes of payload each reorder slot holds: the largest path MTU.
inline constexpr uint32_t kHeldSlot = 4096;

// A packet held in the spraying responder's reorder buffer. `placed` packets
// had their payload written directly; the rest carry a copy in their slot's
// payload page. All zero bytes are an unused slot: the reorder buffer's
// slots live in zeroed memory no constructor runs over (Qp::reorder). A
// used slot's PSN is flagged in Qp::ooo, so a slot is read only when its
// flag is set and the pages of slots never used stay uncommitted.
struct HeldPacket {
    bool used = false;
    bool placed = false;
    wire::RocePacket pkt;
};
static_assert(std::is_trivially_copyable_v<HeldPacket> && std::is_trivially_destructible_v<HeldPacket>);

struct Qp {
    bool live = false;
    Qpn qpn;
    QpType type = QpType::Rc;
    QpState state = QpState::Reset;
    QpInitAttr init;
    QpAttr attr;
    uint32_t mtu = 1024;
    uint16_t sport = 0xC000;

    // What every packet and the scheduler (Engine::times, req_ready) read
    // sits here, together in three cache lines after the attributes: in a
    // fabric of hundreds of NICs few QPs stay in cache between two of their
    // packets, and these fields were spread over eight lines of the QP.
    // ---- requester ----
    uint32_t sq_head = 0;  // next slot to post into
    uint32_t sq_comp = 0;  // oldest WQE not yet completed
    uint32_t sq_req = 0;   // WQE the requester sends from next
    uint32_t req_pkt = 0;  // packet index inside sq[sq_req]
    Psn next_psn;          // PSN of the next new packet
    Psn comp_psn;          // oldest PSN not yet acknowledged
    uint32_t rd_atomic_inflight = 0;
    uint32_t noack_pkts = 0;
    uint32_t rexmit_head = 0, rexmit_tail = 0;  // spraying: the ring `rexmit`
    uint32_t out_head = 0, out_tail = 0;        // responder: the ring `out`
    Nanos next_send{0};    // congestion-control pacing gate for data packets
    Nanos rto_deadline = Nanos::max();
    Nanos rnr_deadline = Nanos::max();
    Nanos sack_deadline = Nanos::max();       // spraying responder: when open holes up to sack_mark get reported
    Nanos read_hole_deadline = Nanos::max();  // spraying completer, see read_rcvd
    bool gate_armed = false;  // next_send not yet seen passed by on_timer or tx_burst
    bool cnp_pending = false;
    uint8_t retry_left = 7;
    uint8_t rnr_left = 7;
    std::vector<SendWqe> sq;  // power-of-two ring
    std::vector<RespItem> out;  // power-of-two ring of queued responses
    // ---- responder ----
    Psn epsn;
    uint32_t msn = 0;
    bool nak_sent = false;  // one PSN sequence NAK per gap, as rxe
    bool in_msg = false;
    uint8_t msg_op = 0;     // opcode of the FIRST packet of the message in progress
    bool write_cached = false;  // its MR takes plain stores (EngineConfig::cached_write_max)
    bool write_discard = false;  // its MR is a discard MR: the payload is checked, not placed
    uint32_t write_len = 0;     // RETH DMA length of the WRITE in progress
    uint64_t write_va = 0;
    uint64_t msg_offset = 0;  // bytes placed so far

    Counters counters;
    // Headers towards the peer, built by the first frame after modify_qp:
    // data (requests, READ responses; the AV's TOS) and control (ACK, NAK,
    // atomic ACK; Not-ECT). UD and CNPs do not use them.
    wire::HeaderTemplate data_tpl, ctl_tpl;

    // ---- requester, less often ----
    std::vector<uint8_t> inline_buf;  // max_inline_data bytes per SQ slot
    // Set by a retry, cleared by progress or the timer (see comp_retry).
    bool gap_retry_armed = false;
    Psn gap_retry_psn;

    // Spraying requester.
    std::vector<Psn> rexmit;  // ring of PSNs to resend selectively
    PsnWindow rexmit_pending;  // PSNs already in `rexmit`
    std::vector<uint8_t> psn_path;  // path each in-flight PSN last used
    std::array<uint16_t, 16> path_sport{};
    std::array<int32_t, 16> path_penalty{};
    uint32_t path_rr = 0;
    // Spraying completer: READ responses come over every path. Those past
    // the first missing one are placed at once and flagged here (base =
    // comp_psn); a gap left open for sack_delay (read_hole_deadline)
    // re-requests the READ from the first missing response. An ACK that
    // covers a READ or atomic still missing its response waits (ack_pending)
    // rather than forcing a retry.
    PsnWindow read_rcvd;
    Psn read_highest;  // highest READ response PSN flagged
    bool ack_pending = false;
    Psn ack_pending_psn;

    // ---- responder, less often ----
    Psn msg_first_psn;
    RecvWqe msg_wqe;          // SEND: the RECV WQE being filled
    bool msg_has_wqe = false;
    std::vector<RespResource> resources;  // max_dest_rd_atomic, oldest overwritten
    uint32_t res_next = 0;
    RecvQueue rq;
    Nanos last_cnp_sent{-1};
    Qpn cnp_dqpn;

    // Spraying responder.
    PsnWindow ooo;  // PSNs held in the reorder buffer
    // The reorder buffer, a slot per window PSN: the slots' HeldPackets,
    // then a page per slot for a payload copy (kHeldSlot). A QP writes only
    // the slots reordering fills, so the buffer commits a page only as it
    // is first written (SparseBuffer): from the heap, every spraying QP's
    // whole megabyte was resident.
    SparseBuffer reorder;
    uint32_t held_slots = 0;  // the window; a power of two
    Psn highest_rcvd;
    Psn sack_mark;

    bool spraying() const { return init.reliability == Reliability::Spray && type == QpType::Rc; }
    // The reorder buffer's layout: the HeldPackets on whole pages, then the
    // payload pages.
    static std::size_t held_meta_bytes(uint32_t slots) {
        return SparseBuffer::whole_pages(std::size_t{slots} * sizeof(HeldPacket));
    }
    static std::size_t reorder_bytes(uint32_t slots) {
        return held_meta_bytes(slots) + std::size_t{slots} * kHeldSlot;
    }
    // The slot for `psn`, and its payload page.
    uint32_t held_index(Psn psn) const { return psn.value() & (held_slots - 1); }
    HeldPacket& held(Psn psn) { return reinterpret_cast<HeldPacket*>(reorder.data())[held_index(psn)]; }
    uint8_t* held_payload(Psn psn) {
        return reorder.data() + held_meta_bytes(held_slots) + std::size_t{held_index(psn)} * kHeldSlot;
    }
    SendWqe& wqe(uint32_t i) { return sq[i & (sq.size() - 1)]; }
    const SendWqe& wqe(uint32_t i) const { return sq[i & (sq.size() - 1)]; }
    uint32_t out_size() const { return out_tail - out_head; }
    RespItem& out_at(uint32_t i) { return out[i & (out.size() - 1)]; }
};

}  // namespace rocemu::transport
