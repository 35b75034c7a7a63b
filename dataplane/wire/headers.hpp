// Zero-copy views over IBTA transport headers. A view wraps a pointer to the
// header's first byte; getters decode big-endian fields in place, and the
// setters exist only on views over mutable bytes. The caller guarantees the
// header's bytes are there (the parser checks lengths from the opcode table).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/units.hpp"
#include "dataplane/wire/bytes.hpp"

namespace rocemu::wire {

template <typename B>
class HeaderView {
    static_assert(std::is_same_v<std::remove_const_t<B>, uint8_t>);

public:
    explicit HeaderView(B* p) : p_(p) {}
    B* data() const { return p_; }

protected:
    static constexpr bool kMutable = !std::is_const_v<B>;
    B* p_;
};

template <typename B>
struct BthView : HeaderView<B> {
    using HeaderView<B>::HeaderView;
    using HeaderView<B>::p_;
    uint8_t opcode() const { return p_[0]; }
    bool se() const { return p_[1] & 0x80; }
    bool mig() const { return p_[1] & 0x40; }
    uint8_t pad() const { return (p_[1] >> 4) & 3; }
    uint8_t tver() const { return p_[1] & 0x0F; }
    uint16_t pkey() const { return load_be16(p_ + 2); }
    bool fecn() const { return p_[4] & 0x80; }
    bool becn() const { return p_[4] & 0x40; }
    Qpn dqpn() const { return Qpn{load_be24(p_ + 5)}; }
    bool ackreq() const { return p_[8] & 0x80; }
    Psn psn() const { return Psn{load_be24(p_ + 9)}; }

    void set(uint8_t opcode, bool se, bool mig, uint8_t pad, uint8_t tver, uint16_t pkey, bool fecn, bool becn,
             Qpn dqpn, bool ackreq, Psn psn) requires(HeaderView<B>::kMutable) {
        p_[0] = opcode;
        p_[1] = static_cast<uint8_t>((se ? 0x80 : 0) | (mig ? 0x40 : 0) | (pad & 3) << 4 | (tver & 0x0F));
        store_be16(p_ + 2, pkey);
        p_[4] = static_cast<uint8_t>((fecn ? 0x80 : 0) | (becn ? 0x40 : 0));
        store_be24(p_ + 5, dqpn.v);
        p_[8] = ackreq ? 0x80 : 0;
        store_be24(p_ + 9, psn.value());
    }
    void set_becn(bool b) requires(HeaderView<B>::kMutable) { p_[4] = static_cast<uint8_t>((p_[4] & ~0x40) | (b ? 0x40 : 0)); }
};

template <typename B>
struct RethView : HeaderView<B> {
    using HeaderView<B>::HeaderView;
    using HeaderView<B>::p_;
    uint64_t va() const { return load_be64(p_); }
    uint32_t rkey() const { return load_be32(p_ + 8); }
    uint32_t dma_len() const { return load_be32(p_ + 12); }
    void set(uint64_t va, uint32_t rkey, uint32_t len) requires(HeaderView<B>::kMutable) {
        store_be64(p_, va);
        store_be32(p_ + 8, rkey);
        store_be32(p_ + 12, len);
    }
};

template <typename B>
struct AethView : HeaderView<B> {
    using HeaderView<B>::HeaderView;
    using HeaderView<B>::p_;
    uint8_t syndrome() const { return p_[0]; }
    uint32_t msn() const { return load_be24(p_ + 1); }
    void set(uint8_t syndrome, uint32_t msn) requires(HeaderView<B>::kMutable) {
        p_[0] = syndrome;
        store_be24(p_ + 1, msn);
    }
};

template <typename B>
struct AtomicEthView : HeaderView<B> {
    using HeaderView<B>::HeaderView;
    using HeaderView<B>::p_;
    uint64_t va() const { return load_be64(p_); }
    uint32_t rkey() const { return load_be32(p_ + 8); }
    uint64_t swap_add() const { return load_be64(p_ + 12); }
    uint64_t compare() const { return load_be64(p_ + 20); }
    void set(uint64_t va, uint32_t rkey, uint64_t swap_add, uint64_t compare) requires(HeaderView<B>::kMutable) {
        store_be64(p_, va);
        store_be32(p_ + 8, rkey);
        store_be64(p_ + 12, swap_add);
        store_be64(p_ + 20, compare);
    }
};

template <typename B>
struct DethView : HeaderView<B> {
    using HeaderView<B>::HeaderView;
    using HeaderView<B>::p_;
    uint32_t qkey() const { return load_be32(p_); }
    Qpn src_qp() const { return Qpn{load_be24(p_ + 5)}; }
    void set(uint32_t qkey, Qpn src_qp) requires(HeaderView<B>::kMutable) {
        store_be32(p_, qkey);
        p_[4] = 0;
        store_be24(p_ + 5, src_qp.v);
    }
};

// One 32- or 64-bit big-endian field: ImmDt, IETH, FETH (32) and AtomicAckETH (64).
template <typename B, typename T>
struct WordView : HeaderView<B> {
    using HeaderView<B>::HeaderView;
    using HeaderView<B>::p_;
    T value() const {
        if constexpr (sizeof(T) == 8) return load_be64(p_);
        else return load_be32(p_);
    }
    void set(T v) requires(HeaderView<B>::kMutable) {
        if constexpr (sizeof(T) == 8) store_be64(p_, v);
        else store_be32(p_, v);
    }
};
template <typename B> using ImmDtView = WordView<B, uint32_t>;
template <typename B> using IethView = WordView<B, uint32_t>;
template <typename B> using FethView = WordView<B, uint32_t>;
template <typename B> using AtomicAckEthView = WordView<B, uint64_t>;

}  // namespace rocemu::wire
