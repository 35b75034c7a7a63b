// The poll-mode loop of one emulated NIC on one DPDK port, l2fwd-style:
// rx_burst(32), clock read once, each frame through the host stack (ARP, ICMP,
// RoCEv2 and PFC dispatch), effects turned into frames, timers, frames pulled
// from the transport into mbuf data areas, TX buffered and flushed when full
// or after a short drain time.
//
// The layer above (the transport engine, or an application such as `rocemu
// host`) is a template parameter satisfying NicUpper: no virtual call per
// packet, and a fake upper makes the loop testable.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <concepts>
#include <cstring>
#include <span>

#include "common/units.hpp"
#include "dataplane/dpdk/capture.hpp"
#include "dataplane/dpdk/clock.hpp"
#include "dataplane/dpdk/host/host_stack.hpp"
#include "dataplane/dpdk/port.hpp"
#include "dataplane/dpdk/stats.hpp"
#include "dataplane/dpdk/telemetry.hpp"

namespace rocemu::dpdk {

template <typename U>
concept NicUpper = requires(U u, const U cu, std::span<const uint8_t> in, std::span<uint8_t> out, Nanos now,
                            const host::HostEffect& e) {
    { U::kHandlesRoce } -> std::convertible_to<bool>;
    u.on_roce(in, now);        // a RoCEv2 frame for one of our GIDs; copy what is needed
    u.on_pfc(in, now);         // a PFC or PAUSE frame
    u.on_host_effect(e, now);  // Resolved, ResolveFailed or EchoReply
    { cu.next_timer() } -> std::same_as<Nanos>;
    u.on_timer(now);
    { u.pull_tx(out, now) } -> std::same_as<size_t>;  // writes one frame into `out`; 0 when idle
};

// An upper that can answer CounterQuery (engine and per-QP counters) on the loop thread.
template <typename U>
concept AnswersQueries = requires(U u, CounterQuery& q) { u.answer(q); };

// An upper with no RDMA: RoCEv2 frames are dropped and counted.
struct NoTransport {
    static constexpr bool kHandlesRoce = false;
    void on_roce(std::span<const uint8_t>, Nanos) {}
    void on_pfc(std::span<const uint8_t>, Nanos) {}
    void on_host_effect(const host::HostEffect&, Nanos) {}
    Nanos next_timer() const { return Nanos::max(); }
    void on_timer(Nanos) {}
    size_t pull_tx(std::span<uint8_t>, Nanos) { return 0; }
};

struct NicConfig {
    Nanos tx_drain = Nanos::from_us(100);  // longest a queued frame waits for a fuller burst
    Nanos publish_every = Nanos::from_ms(1);
};

template <NicUpper Upper>
class Nic {
public:
    static constexpr uint16_t kBurst = 32;

    Nic(Port& port, host::HostStack& host, Upper& upper, const TscClock& clock, Capture* capture = nullptr,
        NicConfig cfg = {})
        : port_(port), host_(host), upper_(upper), clock_(clock), capture_(capture), cfg_(cfg),
          board_(port.id(), port.name()) {
        board_.answers_queries = AnswersQueries<Upper>;
        telemetry_add(&board_);
    }
    ~Nic() {
        flush();
        board_.publish(stats_, host_.counters());
        telemetry_remove(&board_);
    }
    Nic(const Nic&) = delete;
    Nic& operator=(const Nic&) = delete;

    // One turn of the loop. Returns the number of frames received.
    uint16_t poll() {
        rte_mbuf* rx[kBurst];
        const uint16_t n = rte_eth_rx_burst(port_.id(), 0, rx, kBurst);
        now_ = clock_.now();
        if (n) {
            stats_.add(PortStat::RxBursts);
            if (capture_) stats_.add(PortStat::CaptureLost, capture_->record(port_.id(), rx, n, false));
        }
        for (uint16_t i = 0; i < n; ++i) receive(rx[i]);
        if (host_.next_timer() <= now_) host_.on_timer(now_, fx_);
        drain_effects();
        if (upper_.next_timer() <= now_) upper_.on_timer(now_);
        pull_from_upper();
        if (tx_n_ && (tx_n_ == kBurst || now_ - last_flush_ >= cfg_.tx_drain)) flush();
        if (now_ - last_publish_ >= cfg_.publish_every) {
            board_.publish(stats_, host_.counters());
            if constexpr (AnswersQueries<Upper>) board_.mailbox().serve([this](CounterQuery& q) { upper_.answer(q); });
            last_publish_ = now_;
        }
        return n;
    }

    // Sends every queued frame now.
    void flush() {
        if (!tx_n_) return;
        const uint16_t sent = rte_eth_tx_burst(port_.id(), 0, tx_, tx_n_);
        for (uint16_t i = 0; i < sent; ++i) stats_.add(PortStat::TxBytes, tx_len_[i]);
        stats_.add(PortStat::TxPackets, sent);
        if (sent < tx_n_) {
            stats_.add(PortStat::DropTxFull, tx_n_ - sent);
            rte_pktmbuf_free_bulk(tx_ + sent, tx_n_ - sent);
        }
        tx_n_ = 0;
        last_flush_ = now_;
    }

    host::PingStatus ping(uint32_t dst, uint16_t id, uint16_t seq, size_t payload_len, uint64_t cookie) {
        const host::PingStatus s = host_.ping(dst, id, seq, payload_len, now_, cookie, fx_);
        drain_effects();
        return s;
    }
    host::PathResult resolve_path(const host::AddressVector& av, uint64_t cookie) {
        host::PathResult r = host_.resolve_path(av, now_, cookie, fx_);
        drain_effects();
        return r;
    }
    void announce() {
        host_.announce(fx_);
        drain_effects();
    }

    Nanos now() const { return now_; }
    const PortStats& stats() const { return stats_; }
    const CounterBoard& board() const { return board_; }

private:
    void receive(rte_mbuf* m) {
        stats_.add(PortStat::RxPackets);
        stats_.add(PortStat::RxBytes, rte_pktmbuf_pkt_len(m));
        if (m->nb_segs != 1) {
            stats_.add(PortStat::DropMultiSegment);
            rte_pktmbuf_free(m);
            return;
        }
        const std::span<uint8_t> frame(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m));
        const host::RxResult r = host_.on_frame(frame, now_, fx_);
        switch (r.verdict) {
            case host::RxVerdict::Reply:
                m->data_len = r.reply_len;
                m->pkt_len = r.reply_len;
                enqueue(m);
                return;
            case host::RxVerdict::Transport:
                if constexpr (Upper::kHandlesRoce) upper_.on_roce(frame, now_);
                else stats_.add(PortStat::DropNoTransport);
                break;
            case host::RxVerdict::Pfc:
                upper_.on_pfc(frame, now_);
                break;
            case host::RxVerdict::Consumed:
            case host::RxVerdict::Drop:
                break;
        }
        rte_pktmbuf_free(m);
    }

    void drain_effects() {
        for (const host::HostEffect& e : fx_) {
            if (e.kind != host::HostEffect::Kind::SendFrame) {
                upper_.on_host_effect(e, now_);
                continue;
            }
            rte_mbuf* m = rte_pktmbuf_alloc(port_.pool());
            char* p = m ? rte_pktmbuf_append(m, e.len) : nullptr;
            if (!p) {
                stats_.add(PortStat::DropNoMbuf);
                rte_pktmbuf_free(m);
                continue;
            }
            std::memcpy(p, e.frame.data(), e.len);
            enqueue(m);
        }
        fx_.clear();
    }

    void pull_from_upper() {
        while (tx_n_ < kBurst) {
            rte_mbuf* m = rte_pktmbuf_alloc(port_.pool());
            if (!m) {
                stats_.add(PortStat::DropNoMbuf);
                return;
            }
            const size_t len = upper_.pull_tx(std::span(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m)), now_);
            if (!len) {
                rte_pktmbuf_free(m);
                return;
            }
            m->data_len = static_cast<uint16_t>(len);
            m->pkt_len = static_cast<uint32_t>(len);
            enqueue(m);
        }
    }

    void enqueue(rte_mbuf* m) {
        if (capture_) stats_.add(PortStat::CaptureLost, capture_->record(port_.id(), &m, 1, true));
        tx_len_[tx_n_] = rte_pktmbuf_pkt_len(m);
        tx_[tx_n_++] = m;
        if (tx_n_ == kBurst) flush();
    }

    Port& port_;
    host::HostStack& host_;
    Upper& upper_;
    const TscClock& clock_;
    Capture* capture_;
    NicConfig cfg_;
    CounterBoard board_;
    PortStats stats_;
    host::HostEffects fx_;
    rte_mbuf* tx_[kBurst];
    uint32_t tx_len_[kBurst];
    uint16_t tx_n_ = 0;
    Nanos now_;
    Nanos last_flush_;
    Nanos last_publish_;
};

}  // namespace rocemu::dpdk
