// The one opcode table. For each BTH opcode: its name, the QP class it belongs
// to, the extended headers it carries (and so their offsets and the fixed
// header length), and what kind of packet it is. The parser and the encoder
// both read it; nothing else knows header layouts per opcode.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace rocemu::wire {

// Extended transport headers, in the order IBTA places them after the BTH.
enum class Hdr : uint8_t { Deth, Feth, Reth, AtomicEth, Aeth, AtomicAckEth, ImmDt, Ieth, CnpPad, kCount };

inline constexpr std::array<uint8_t, static_cast<int>(Hdr::kCount)> kHdrLen = {
    8,   // DETH: Q_Key, reserved byte, source QP
    4,   // FETH (FLUSH): selectivity and placement type
    16,  // RETH: virtual address, R_Key, DMA length
    28,  // AtomicETH: virtual address, R_Key, swap/add data, compare data
    4,   // AETH: syndrome, MSN
    8,   // AtomicAckETH: original remote data
    4,   // ImmDt
    4,   // IETH: R_Key to invalidate
    16,  // CNP: reserved bytes
};

inline constexpr uint32_t kBthLen = 12;
inline constexpr uint32_t kIcrcLen = 4;
inline constexpr uint16_t kRoceUdpPort = 4791;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

enum class QpClass : uint8_t { Rc = 0, Uc = 1, Rd = 2, Ud = 3, Cnp = 4, None = 7 };

// Packet kind bits.
enum OpFlag : uint16_t {
    kOpValid = 1 << 0,
    kOpFirst = 1 << 1,
    kOpMiddle = 1 << 2,
    kOpLast = 1 << 3,
    kOpOnly = kOpFirst | kOpLast,
    kOpPayload = 1 << 4,     // carries a payload (may be 0 bytes on ONLY/LAST)
    kOpFixedPayload = 1 << 5,  // payload length is fixed (ATOMIC_WRITE: 8)
    kOpRequest = 1 << 6,     // sent by a requester
    kOpResponse = 1 << 7,    // sent by a responder (ACK, READ response, atomic ACK)
    kOpSend = 1 << 8,
    kOpWrite = 1 << 9,
    kOpRead = 1 << 10,
    kOpAtomic = 1 << 11,
    kOpImm = 1 << 12,
    kOpInv = 1 << 13,
    kOpCnp = 1 << 14,
};

struct OpcodeInfo {
    const char* name = nullptr;
    uint16_t flags = 0;
    uint16_t hdrs = 0;  // bit (1 << Hdr)
    QpClass cls = QpClass::None;
    uint8_t hdr_len = 0;  // BTH plus every extended header
    std::array<uint8_t, static_cast<int>(Hdr::kCount)> offset{};  // from the BTH start

    constexpr bool valid() const { return flags & kOpValid; }
    constexpr bool has(Hdr h) const { return hdrs & (1u << static_cast<int>(h)); }
    constexpr bool is(uint16_t f) const { return (flags & f) == f; }
};

namespace detail {

constexpr uint16_t bit(Hdr h) { return static_cast<uint16_t>(1u << static_cast<int>(h)); }

constexpr OpcodeInfo make(const char* name, QpClass cls, uint16_t flags, uint16_t hdrs) {
    OpcodeInfo o{};
    o.name = name;
    o.cls = cls;
    o.flags = static_cast<uint16_t>(flags | kOpValid);
    o.hdrs = hdrs;
    uint32_t off = kBthLen;
    for (int h = 0; h < static_cast<int>(Hdr::kCount); ++h) {
        if (hdrs & (1u << h)) {
            o.offset[h] = static_cast<uint8_t>(off);
            off += kHdrLen[h];
        }
    }
    o.hdr_len = static_cast<uint8_t>(off);
    return o;
}

// Per-operation layout, shared by RC and UC (UC uses the first 12).
struct OpLayout {
    uint16_t flags;
    uint16_t hdrs;
};

constexpr OpLayout kLayouts[] = {
    {kOpFirst | kOpPayload | kOpRequest | kOpSend, 0},
    {kOpMiddle | kOpPayload | kOpRequest | kOpSend, 0},
    {kOpLast | kOpPayload | kOpRequest | kOpSend, 0},
    {kOpLast | kOpPayload | kOpRequest | kOpSend | kOpImm, bit(Hdr::ImmDt)},
    {kOpOnly | kOpPayload | kOpRequest | kOpSend, 0},
    {kOpOnly | kOpPayload | kOpRequest | kOpSend | kOpImm, bit(Hdr::ImmDt)},
    {kOpFirst | kOpPayload | kOpRequest | kOpWrite, bit(Hdr::Reth)},
    {kOpMiddle | kOpPayload | kOpRequest | kOpWrite, 0},
    {kOpLast | kOpPayload | kOpRequest | kOpWrite, 0},
    {kOpLast | kOpPayload | kOpRequest | kOpWrite | kOpImm, bit(Hdr::ImmDt)},
    {kOpOnly | kOpPayload | kOpRequest | kOpWrite, bit(Hdr::Reth)},
    {kOpOnly | kOpPayload | kOpRequest | kOpWrite | kOpImm, bit(Hdr::Reth) | bit(Hdr::ImmDt)},
    {kOpOnly | kOpRequest | kOpRead, bit(Hdr::Reth)},
    {kOpFirst | kOpPayload | kOpResponse | kOpRead, bit(Hdr::Aeth)},
    {kOpMiddle | kOpPayload | kOpResponse | kOpRead, 0},
    {kOpLast | kOpPayload | kOpResponse | kOpRead, bit(Hdr::Aeth)},
    {kOpOnly | kOpPayload | kOpResponse | kOpRead, bit(Hdr::Aeth)},
    {kOpOnly | kOpResponse, bit(Hdr::Aeth)},
    {kOpOnly | kOpResponse | kOpAtomic, bit(Hdr::Aeth) | bit(Hdr::AtomicAckEth)},
    {kOpOnly | kOpRequest | kOpAtomic, bit(Hdr::AtomicEth)},
    {kOpOnly | kOpRequest | kOpAtomic, bit(Hdr::AtomicEth)},
    {0, 0},
    {kOpLast | kOpPayload | kOpRequest | kOpSend | kOpInv, bit(Hdr::Ieth)},
    {kOpOnly | kOpPayload | kOpRequest | kOpSend | kOpInv, bit(Hdr::Ieth)},
    {0, 0},
    {0, 0},
    {0, 0},
    {0, 0},
    {kOpOnly | kOpRequest, bit(Hdr::Feth) | bit(Hdr::Reth)},
    {kOpOnly | kOpPayload | kOpFixedPayload | kOpRequest | kOpAtomic, bit(Hdr::Reth)},
};

constexpr std::array<OpcodeInfo, 256> build_table() {
    std::array<OpcodeInfo, 256> t{};
    constexpr const char* rc_full[] = {
        "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_SEND_LAST_WITH_IMMEDIATE", "RC_SEND_ONLY",
        "RC_SEND_ONLY_WITH_IMMEDIATE", "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST",
        "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        "RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_FIRST", "RC_RDMA_READ_RESPONSE_MIDDLE",
        "RC_RDMA_READ_RESPONSE_LAST", "RC_RDMA_READ_RESPONSE_ONLY", "RC_ACKNOWLEDGE", "RC_ATOMIC_ACKNOWLEDGE",
        "RC_COMPARE_SWAP", "RC_FETCH_ADD", nullptr, "RC_SEND_LAST_WITH_INVALIDATE",
        "RC_SEND_ONLY_WITH_INVALIDATE", nullptr, nullptr, nullptr, nullptr, "RC_FLUSH", "RC_ATOMIC_WRITE",
    };
    constexpr const char* uc_full[] = {
        "UC_SEND_FIRST", "UC_SEND_MIDDLE", "UC_SEND_LAST", "UC_SEND_LAST_WITH_IMMEDIATE", "UC_SEND_ONLY",
        "UC_SEND_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_LAST",
        "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "UC_RDMA_WRITE_ONLY", "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    };
    for (int i = 0; i < 30; ++i) {
        if (rc_full[i] != nullptr) t[0x00 + i] = make(rc_full[i], QpClass::Rc, kLayouts[i].flags, kLayouts[i].hdrs);
    }
    for (int i = 0; i < 12; ++i) {
        t[0x20 + i] = make(uc_full[i], QpClass::Uc, kLayouts[i].flags, kLayouts[i].hdrs);
    }
    t[0x64] = make("UD_SEND_ONLY", QpClass::Ud, kLayouts[4].flags, bit(Hdr::Deth));
    t[0x65] = make("UD_SEND_ONLY_WITH_IMMEDIATE", QpClass::Ud, kLayouts[5].flags, bit(Hdr::Deth) | bit(Hdr::ImmDt));
    t[0x81] = make("CNP", QpClass::Cnp, kOpOnly | kOpCnp, bit(Hdr::CnpPad));
    return t;
}

}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodes = detail::build_table();

inline constexpr const OpcodeInfo& opcode_info(uint8_t op) { return kOpcodes[op]; }

// An IBTA payload is at most the largest path MTU.
inline constexpr uint32_t kMaxPayload = 4096;
// The longest headers in front of the BTH: Ethernet, 802.1Q, IPv6, UDP.
inline constexpr uint32_t kMaxOuterLen = 14 + 4 + 40 + 8;

namespace detail {
// BTH, extended headers and (with `payloads`) payload of the longest packet
// any opcode makes.
constexpr uint32_t max_transport_len(bool payloads = true) {
    uint32_t m = 0;
    for (const OpcodeInfo& o : kOpcodes) {
        if (!o.valid()) continue;
        const uint32_t payload = !payloads || !o.is(kOpPayload) ? 0 : o.is(kOpFixedPayload) ? 8 : kMaxPayload;
        m = std::max<uint32_t>(m, o.hdr_len + payload);
    }
    return m;
}
}  // namespace detail

// The longest RoCEv2 frame: Ethernet with an 802.1Q tag, IPv6, UDP, the
// longest transport packet (RDMA WRITE ONLY with immediate: BTH, RETH and
// ImmDt before 4096 bytes) and the ICRC. Every frame the transport engine or
// the fabric's NICs build fits a buffer of this size.
inline constexpr uint32_t kMaxRoceFrame = kMaxOuterLen + detail::max_transport_len() + kIcrcLen;
static_assert(kMaxRoceFrame == 4198);
// The longest headers in front of a payload: the same outer headers, BTH and
// AtomicETH (the longest extended headers).
inline constexpr uint32_t kMaxRoceHeaders = kMaxOuterLen + detail::max_transport_len(false);
static_assert(kMaxRoceHeaders == 106);

// Opcode values, named as in IBTA and include/rdma/ib_pack.h.
namespace op {
inline constexpr uint8_t kRc = 0x00, kUc = 0x20, kRd = 0x40, kUd = 0x60;
inline constexpr uint8_t SEND_FIRST = 0x00, SEND_MIDDLE = 0x01, SEND_LAST = 0x02, SEND_LAST_IMM = 0x03,
                         SEND_ONLY = 0x04, SEND_ONLY_IMM = 0x05, WRITE_FIRST = 0x06, WRITE_MIDDLE = 0x07,
                         WRITE_LAST = 0x08, WRITE_LAST_IMM = 0x09, WRITE_ONLY = 0x0a, WRITE_ONLY_IMM = 0x0b,
                         READ_REQUEST = 0x0c, READ_RESPONSE_FIRST = 0x0d, READ_RESPONSE_MIDDLE = 0x0e,
                         READ_RESPONSE_LAST = 0x0f, READ_RESPONSE_ONLY = 0x10, ACKNOWLEDGE = 0x11,
                         ATOMIC_ACKNOWLEDGE = 0x12, COMPARE_SWAP = 0x13, FETCH_ADD = 0x14,
                         SEND_LAST_INV = 0x16, SEND_ONLY_INV = 0x17, FLUSH = 0x1c, ATOMIC_WRITE = 0x1d;
inline constexpr uint8_t CNP = 0x81;
}  // namespace op

inline constexpr QpClass opcode_class(uint8_t opcode) {
    return kOpcodes[opcode].valid() ? kOpcodes[opcode].cls : QpClass::None;
}

// AETH syndrome types and NAK codes.
namespace aeth {
inline constexpr uint8_t kTypeMask = 0xE0;
inline constexpr uint8_t kAck = 0x00, kRnrNak = 0x20, kNak = 0x60;
inline constexpr uint8_t kNakPsnSeqError = 0x60, kNakInvalidRequest = 0x61, kNakRemoteAccess = 0x62,
                         kNakRemoteOperational = 0x63, kNakInvalidRdRequest = 0x64;
inline constexpr uint8_t kCreditInvalid = 0x1F;
}  // namespace aeth

}  // namespace rocemu::wire
