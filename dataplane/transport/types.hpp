// Public vocabulary of the transport engine: ibverbs-shaped enums, work
// requests, completions, QP attributes and the counters. Names follow
// <infiniband/verbs.h> so the verbs/ wrapper maps them one to one.
#pragma once

#include <optional>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/fixed_vec.hpp"
#include "common/units.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::transport {

enum class QpType : uint8_t { Rc, Uc, Ud };
enum class QpState : uint8_t { Reset, Init, Rtr, Rts, Sqd, Sqe, Err };
const char* to_string(QpState s);

// Memory-region and QP access flags (IBV_ACCESS_*).
enum Access : uint32_t {
    kLocalWrite = 1,
    kRemoteWrite = 2,
    kRemoteRead = 4,
    kRemoteAtomic = 8,
};

enum class WrOpcode : uint8_t { RdmaWrite, RdmaWriteWithImm, Send, SendWithImm, RdmaRead, AtomicCmpAndSwp, AtomicFetchAndAdd };
enum class WcOpcode : uint8_t { Send, RdmaWrite, RdmaRead, CompSwap, FetchAdd, Recv = 128, RecvRdmaWithImm };

// ibv_wc_status, same order and values.
enum class WcStatus : uint8_t {
    Success, LocLenErr, LocQpOpErr, LocEecOpErr, LocProtErr, WrFlushErr, MwBindErr, BadRespErr, LocAccessErr,
    RemInvReqErr, RemAccessErr, RemOpErr, RetryExcErr, RnrRetryExcErr, LocRddViolErr, RemInvRdReqErr,
    RemAbortErr, InvEecnErr, InvEecStateErr, FatalErr, RespTimeoutErr, GeneralErr,
};
const char* to_string(WcStatus s);

enum SendFlags : uint32_t { kSendFence = 1, kSendSignaled = 2, kSendSolicited = 4, kSendInline = 8 };
enum WcFlags : uint32_t { kWcGrh = 1, kWcWithImm = 2 };

// Handles. Zero is never a valid handle.
struct PdHandle { uint32_t id = 0; };
struct CqHandle { uint32_t id = 0; };
struct SrqHandle { uint32_t id = 0; };
struct AhHandle { uint32_t id = 0; };
struct MrHandle {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
};

struct Sge {
    uint64_t addr = 0;  // a virtual address inside the MR named by lkey
    uint32_t length = 0;
    uint32_t lkey = 0;
};

inline constexpr uint32_t kMaxSge = 8;
using SgeList = FixedVec<Sge, kMaxSge>;

struct SendWr {
    uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::Send;
    uint32_t send_flags = 0;
    SgeList sg_list;
    uint32_t imm_data = 0;  // host order of the big-endian ImmDt bytes
    // RDMA and atomics.
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint64_t compare_add = 0;  // compare for CAS, addend for FETCH_ADD
    uint64_t swap = 0;
    // UD.
    AhHandle ah;
    Qpn remote_qpn;
    uint32_t remote_qkey = 0;
};

struct RecvWr {
    uint64_t wr_id = 0;
    SgeList sg_list;
};

struct Wc {
    uint64_t wr_id = 0;
    WcStatus status = WcStatus::Success;
    WcOpcode opcode = WcOpcode::Send;
    uint32_t byte_len = 0;
    uint32_t imm_data = 0;
    Qpn qp_num;
    Qpn src_qp;
    uint32_t wc_flags = 0;
};

// The path a QP's packets take, given rather than resolved: the runtime
// resolves ARP before moving the QP to RTR.
struct AddressVector {
    wire::IpAddr dgid;
    uint8_t sgid_index = 0;  // into EngineConfig::gids
    wire::MacAddr dmac;
    uint8_t traffic_class = wire::ecn::kEct0;  // DSCP << 2 | ECN
    uint8_t hop_limit = 64;
    uint32_t flow_label = 0;
    bool vlan = false;
    uint16_t vlan_id = 0;
    uint8_t pcp = 0;
    uint16_t udp_sport = 0;  // 0: derived from the QPNs as rxe does
};

enum class PathMtu : uint8_t { Mtu256 = 1, Mtu512, Mtu1024, Mtu2048, Mtu4096 };
constexpr uint32_t mtu_bytes(PathMtu m) { return 128u << static_cast<uint8_t>(m); }
// The IB path MTU of `bytes` (256, 512, 1024, 2048 or 4096), or nullopt.
constexpr std::optional<PathMtu> path_mtu_from_bytes(int bytes) {
    for (auto m : {PathMtu::Mtu256, PathMtu::Mtu512, PathMtu::Mtu1024, PathMtu::Mtu2048, PathMtu::Mtu4096})
        if (static_cast<int>(mtu_bytes(m)) == bytes) return m;
    return std::nullopt;
}

// ibv_qp_attr_mask, same bit values.
enum QpAttrMask : uint32_t {
    kAttrState = 1 << 0,
    kAttrCurState = 1 << 1,
    kAttrEnSqdAsyncNotify = 1 << 2,
    kAttrAccessFlags = 1 << 3,
    kAttrPkeyIndex = 1 << 4,
    kAttrPort = 1 << 5,
    kAttrQkey = 1 << 6,
    kAttrAv = 1 << 7,
    kAttrPathMtu = 1 << 8,
    kAttrTimeout = 1 << 9,
    kAttrRetryCnt = 1 << 10,
    kAttrRnrRetry = 1 << 11,
    kAttrRqPsn = 1 << 12,
    kAttrMaxQpRdAtomic = 1 << 13,
    kAttrAltPath = 1 << 14,
    kAttrMinRnrTimer = 1 << 15,
    kAttrSqPsn = 1 << 16,
    kAttrMaxDestRdAtomic = 1 << 17,
    kAttrPathMigState = 1 << 18,
    kAttrCap = 1 << 19,
    kAttrDestQpn = 1 << 20,
    kAttrMaskAll = (1 << 21) - 1,
};
const char* attr_name(uint32_t single_bit);

struct QpAttr {
    QpState qp_state = QpState::Reset;
    QpState cur_qp_state = QpState::Reset;
    PathMtu path_mtu = PathMtu::Mtu1024;
    Psn rq_psn;
    Psn sq_psn;
    Qpn dest_qp_num;
    uint32_t qp_access_flags = 0;
    uint32_t qkey = 0;
    uint16_t pkey_index = 0;
    uint8_t port_num = 1;
    AddressVector ah_attr;
    uint8_t max_rd_atomic = 1;
    uint8_t max_dest_rd_atomic = 1;
    uint8_t min_rnr_timer = 0;  // IBTA RNR timer code, 0..31
    uint8_t timeout = 14;       // 4.096 us << timeout; 0 disables the retransmit timer
    uint8_t retry_cnt = 7;      // 7: retry forever
    uint8_t rnr_retry = 7;      // 7: retry forever
    uint8_t en_sqd_async_notify = 0;
};

// How a reliable QP recovers from loss (README: "Two reliability modes").
enum class Reliability : uint8_t { Interop, Spray };
enum class SprayPolicy : uint8_t { RoundRobin, Random, PathAware };

struct QpCap {
    uint32_t max_send_wr = 256;
    uint32_t max_recv_wr = 256;
    uint32_t max_send_sge = kMaxSge;
    uint32_t max_recv_sge = kMaxSge;
    uint32_t max_inline_data = 256;
};

struct QpInitAttr {
    QpType qp_type = QpType::Rc;
    PdHandle pd;
    CqHandle send_cq;
    CqHandle recv_cq;
    SrqHandle srq;  // id 0: the QP has its own receive queue
    QpCap cap;
    bool sq_sig_all = false;
    Reliability reliability = Reliability::Interop;
    SprayPolicy spray_policy = SprayPolicy::RoundRobin;
    uint8_t spray_paths = 4;            // 1..16 UDP source ports
    uint16_t reorder_window = 256;      // PSNs; a power of two, 16..4096
    bool peer_accepts_cnp = false;      // send CNPs to this QP's peer on ECN-CE
    // Responses (ACK/NAK, READ response, atomic ACK) the responder can hold
    // queued before it drops one (DropReason::RespQueueFull); a power of two,
    // 1..4096. A QP that never answers requests (the sending end of a
    // one-way flow) needs 1.
    uint16_t resp_queue = 256;
};

// An ibverbs-style error: errno value, the attribute at fault, and a message.
struct VerbsError {
    int err = 0;  // 0 on success, else an errno value (EINVAL, ENOMEM, ...)
    const char* attr = "";
    std::string msg;
    explicit operator bool() const { return err != 0; }
};

// Why a received frame was dropped. Every drop has one reason and a counter.
enum class DropReason : uint8_t {
    ParseError,       // wire::parse_roce failed (see parse_errors)
    BadIcrc,
    BadPkey,
    UnknownQpn,
    QpState,          // QP not in a state that receives
    WrongQpClass,     // opcode class does not match the QP type
    AddressMismatch,  // IP source/destination do not match the QP's address vector
    NotForUs,         // destination GID is not one of the engine's
    BadQkey,
    NoRecvWqe,        // UC/UD message with no RECV posted
    UcSequence,       // UC packet outside the message it should belong to
    DuplicateInWindow,
    OutOfWindow,      // spraying: PSN beyond the reorder window
    GhostResponse,    // response that matches no outstanding request
    BadResponse,      // response with a wrong opcode sequence or length
    StaleResponse,    // duplicate or already-handled response
    ResourceMissing,  // duplicate READ/atomic whose saved state is gone
    QpError,          // QP is in ERR
    Oversize,         // spraying: an out-of-order payload longer than the path MTU
    UcInvalid,        // UC request that RC would NAK (access, length, opcode); UC drops it
    SplitHeaders,     // a chained frame whose first segment does not hold every header
    RespQueueFull,    // a response (ACK, NAK, READ response, atomic ACK) not queued: the QP's
                      // response queue is full because the runtime has not pulled its frames
    kCount,
};
const char* to_string(DropReason r);
// A response the requester ignores (a late duplicate ACK, one for PSNs
// already completed): counted as a drop reason, but nothing was lost. Run
// reports keep these apart from drops.
constexpr bool is_ignored_response(DropReason r) {
    return r == DropReason::StaleResponse || r == DropReason::GhostResponse;
}
// The same by counter name, as to_string() gives it ("drop_stale_response").
bool is_ignored_response(std::string_view counter);

// Names and meaning follow rxe's hw_counters plus the mlx5 CNP counters.
struct Counters {
    uint64_t sent_pkts = 0;
    uint64_t rcvd_pkts = 0;
    uint64_t duplicate_request = 0;
    uint64_t out_of_seq_request = 0;
    uint64_t rcvd_rnr_err = 0;
    uint64_t send_rnr_err = 0;
    uint64_t rcvd_seq_err = 0;
    uint64_t ack_deferred = 0;
    uint64_t retry_exceeded_err = 0;
    uint64_t retry_rnr_exceeded_err = 0;
    uint64_t completer_retry_err = 0;
    uint64_t send_err = 0;
    uint64_t link_downed = 0;
    uint64_t rdma_sends = 0;
    uint64_t rdma_recvs = 0;
    uint64_t np_cnp_sent = 0;
    uint64_t rp_cnp_handled = 0;
    uint64_t np_ecn_marked_roce_packets = 0;
    uint64_t selective_retransmits = 0;
    uint64_t sack_sent = 0;
    uint64_t direct_placed = 0;  // spraying: early WRITE packets written straight to memory
    uint64_t rcvd_bytes = 0;     // payload of SEND and WRITE packets executed (in order, once each)
    std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> drops{};

    void add(const Counters& o);
};

// Calls f(name, value) for every counter, drops as "drop_<reason>".
template <typename F>
void for_each_counter(const Counters& c, F&& f) {
    f("sent_pkts", c.sent_pkts);
    f("rcvd_pkts", c.rcvd_pkts);
    f("duplicate_request", c.duplicate_request);
    f("out_of_seq_request", c.out_of_seq_request);
    f("rcvd_rnr_err", c.rcvd_rnr_err);
    f("send_rnr_err", c.send_rnr_err);
    f("rcvd_seq_err", c.rcvd_seq_err);
    f("ack_deferred", c.ack_deferred);
    f("retry_exceeded_err", c.retry_exceeded_err);
    f("retry_rnr_exceeded_err", c.retry_rnr_exceeded_err);
    f("completer_retry_err", c.completer_retry_err);
    f("send_err", c.send_err);
    f("link_downed", c.link_downed);
    f("rdma_sends", c.rdma_sends);
    f("rdma_recvs", c.rdma_recvs);
    f("np_cnp_sent", c.np_cnp_sent);
    f("rp_cnp_handled", c.rp_cnp_handled);
    f("np_ecn_marked_roce_packets", c.np_ecn_marked_roce_packets);
    f("selective_retransmits", c.selective_retransmits);
    f("sack_sent", c.sack_sent);
    f("direct_placed", c.direct_placed);
    f("rcvd_bytes", c.rcvd_bytes);
    for (size_t i = 0; i < c.drops.size(); ++i) f(to_string(static_cast<DropReason>(i)), c.drops[i]);
}

}  // namespace rocemu::transport
