// The pluggable congestion-control interface of one requester QP.
//
// Every algorithm exposes both a pacing rate (next_send_time) and a window, so
// rate-based (DCQCN, TIMELY) and window-based (DCTCP-style, HPCC) algorithms
// fit the same transmit scheduler: a QP may send when now >= next_send_time()
// and its bytes in flight are below window(). Dispatch is a std::variant, so
// there is no virtual call per packet.
#pragma once

#include <concepts>
#include <variant>

#include "cc/config.hpp"
#include "cc/dcqcn_rp.hpp"
#include "cc/pacer.hpp"

namespace rocemu::cc {

template <typename T>
concept CcAlgorithmImpl = requires(T& t, const T& ct, Bytes b, Nanos n, const AckInfo& a) {
    t.on_tx(b, n);
    t.on_cnp(n);
    t.on_ack(a, n);
    t.on_timer(n);
    { ct.next_send_time() } -> std::same_as<Nanos>;
    { ct.next_timer() } -> std::same_as<Nanos>;
    { ct.rate() } -> std::same_as<BitsPerSec>;
    { ct.target_rate() } -> std::same_as<BitsPerSec>;
    { ct.window() } -> std::same_as<Bytes>;
    { ct.counters() } -> std::same_as<const RpCounters&>;
};

// "none": paced at line rate, CNPs counted and otherwise ignored.
class NoneCc {
public:
    explicit NoneCc(BitsPerSec line_rate) : pacer_(line_rate) {}
    void on_tx(Bytes b, Nanos now) { pacer_.on_tx(b, now); }
    void on_cnp(Nanos) { ++counters_.cnp_handled; }
    void on_ack(const AckInfo&, Nanos) {}
    void on_timer(Nanos) {}
    Nanos next_send_time() const { return pacer_.next_send_time(); }
    Nanos next_timer() const { return Nanos::max(); }
    BitsPerSec rate() const { return pacer_.rate(); }
    BitsPerSec target_rate() const { return pacer_.rate(); }
    Bytes window() const { return Bytes{UINT64_MAX}; }
    const RpCounters& counters() const { return counters_; }

private:
    Pacer pacer_;
    RpCounters counters_;
};

static_assert(CcAlgorithmImpl<NoneCc>);
static_assert(CcAlgorithmImpl<DcqcnRp>);

class QpCc {
public:
    // `cfg` must outlive the QP.
    QpCc(const CcConfig& cfg, BitsPerSec line_rate)
        : algo_(cfg.algorithm == CcAlgorithm::kDcqcn ? Algo{std::in_place_type<DcqcnRp>, cfg.dcqcn, line_rate}
                                                     : Algo{std::in_place_type<NoneCc>, line_rate}) {}

    void on_tx(Bytes b, Nanos now) { std::visit([&](auto& a) { a.on_tx(b, now); }, algo_); }
    void on_cnp(Nanos now) { std::visit([&](auto& a) { a.on_cnp(now); }, algo_); }
    void on_ack(const AckInfo& ack, Nanos now) { std::visit([&](auto& a) { a.on_ack(ack, now); }, algo_); }
    void on_timer(Nanos now) { std::visit([&](auto& a) { a.on_timer(now); }, algo_); }
    Nanos next_send_time() const { return std::visit([](const auto& a) { return a.next_send_time(); }, algo_); }
    Nanos next_timer() const { return std::visit([](const auto& a) { return a.next_timer(); }, algo_); }
    BitsPerSec rate() const { return std::visit([](const auto& a) { return a.rate(); }, algo_); }
    BitsPerSec target_rate() const { return std::visit([](const auto& a) { return a.target_rate(); }, algo_); }
    Bytes window() const { return std::visit([](const auto& a) { return a.window(); }, algo_); }
    const RpCounters& counters() const {
        return std::visit([](const auto& a) -> const RpCounters& { return a.counters(); }, algo_);
    }
    CcAlgorithm algorithm() const {
        return std::holds_alternative<DcqcnRp>(algo_) ? CcAlgorithm::kDcqcn : CcAlgorithm::kNone;
    }

private:
    using Algo = std::variant<NoneCc, DcqcnRp>;
    Algo algo_;
};

}  // namespace rocemu::cc
