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

#include <algorithm>
#include <array>
#include <atomic>
#include <concepts>
#include <cstring>
#include <span>

#include "common/units.hpp"
#include "dataplane/dpdk/capture.hpp"
#include "dataplane/dpdk/clock.hpp"
#include "dataplane/dpdk/host/host_stack.hpp"
#include "dataplane/dpdk/port.hpp"
#include "dataplane/dpdk/rx_pfc.hpp"
#include "dataplane/dpdk/stats.hpp"
#include "dataplane/dpdk/telemetry.hpp"

namespace rocemu::dpdk {

// A frame buffer the loop lends the upper: an mbuf's data area, and the
// length of the frame the upper wrote into it. A zero-copy frame
// (transport::TxFrame::ext) has only its headers there: its payload is
// ext_len bytes at ext (an MR's), and pad + ICRC are tail; the loop sends
// the three as a chain and takes the frame off *pin when the payload's mbuf
// is freed.
struct TxSlot {
    std::span<uint8_t> buf;
    uint32_t len = 0;
    const uint8_t* ext = nullptr;
    uint32_t ext_len = 0;
    std::atomic<uint32_t>* pin = nullptr;
    uint8_t tail[8] = {};
    uint8_t tail_len = 0;
};

template <typename U>
concept NicUpper = requires(U u, const U cu, std::span<const uint8_t> in, std::span<TxSlot> out, Nanos now,
                            const host::HostEffect& e) {
    { U::kHandlesRoce } -> std::convertible_to<bool>;
    u.on_roce(in, now);        // a RoCEv2 frame for one of our GIDs; copy what is needed
    u.on_pfc(in, now);         // a PFC or PAUSE frame
    u.on_host_effect(e, now);  // Resolved, ResolveFailed or EchoReply
    { cu.next_timer() } -> std::same_as<Nanos>;
    u.on_timer(now);
    // Fills out[0..n) with frames (buf, len) and returns n; 0 when idle.
    { u.pull_tx(out, now) } -> std::same_as<size_t>;
};

// An upper that completes work with the host stack (ARP results); the loop hands it over.
template <typename U>
concept BindsHost = requires(U u, host::HostStack& h) { u.bind_host(h); };

// An upper that can answer CounterQuery (engine and per-QP counters) on the loop thread.
template <typename U>
concept AnswersQueries = requires(U u, CounterQuery& q) { u.answer(q); };

// An upper that takes a RoCEv2 frame received as an mbuf chain, segment by
// segment (every header in the first): a sender's zero-copy frame that
// net_ring handed over as it was sent.
template <typename U>
concept TakesChains = requires(U u, std::span<const std::span<const uint8_t>> segs, Nanos now) {
    u.on_roce_chain(segs, now);
};

// An upper with no RDMA: RoCEv2 frames are dropped and counted.
struct NoTransport {
    static constexpr bool kHandlesRoce = false;
    void on_roce(std::span<const uint8_t>, Nanos) {}
    void on_pfc(std::span<const uint8_t>, Nanos) {}
    void on_host_effect(const host::HostEffect&, Nanos) {}
    Nanos next_timer() const { return Nanos::max(); }
    void on_timer(Nanos) {}
    size_t pull_tx(std::span<TxSlot>, Nanos) { return 0; }
};

struct NicConfig {
    Nanos tx_drain = Nanos::from_us(100);  // longest a queued frame waits for a fuller burst
    // The TX watchdog: when the PMD has refused the head of the TX queue for
    // longer than this (a peer that stopped draining, a frame it will never
    // take), the queued frames are dropped (drop_tx_timeout) and the loop
    // goes on; the transport retransmits. Zero: wait forever.
    Nanos tx_timeout = Nanos::from_s(1);
    Nanos publish_every = Nanos::from_ms(1);
    // PFC from the receive backlog: the PMD's RX queue where it can count it
    // (rte_eth_rx_queue_count) plus the frames the loop holds unhandled.
    RxPfcConfig pfc_rx;
    // Lab knobs. Every Nth ECN-capable RoCEv2 frame received is marked CE
    // before the engine sees it, as a congested switch in front of the NIC
    // would (0: off). At most rx_max_pps received frames are handled per
    // second; the rest wait in the receive backlog (0: no limit).
    uint32_t mark_ce_every = 0;
    uint64_t rx_max_pps = 0;
};

template <NicUpper Upper>
class Nic {
public:
    static constexpr uint16_t kBurst = 32;
    // Longest chain taken on RX; a sender's zero-copy frame has 3 segments.
    static constexpr uint16_t kMaxSegs = 16;
    // Frames the loop takes from the PMD ahead of handling them (power of two).
    static constexpr uint32_t kRxBacklog = 4096;
    // The longest frame a port carries beyond its MTU: the Ethernet header
    // and one VLAN tag (mbuf lengths hold no FCS).
    static constexpr uint32_t kL2Overhead = 14 + 4;

    Nic(Port& port, host::HostStack& host, Upper& upper, const TscClock& clock, Capture* capture = nullptr,
        NicConfig cfg = {})
        : port_(port), host_(host), upper_(upper), clock_(clock), capture_(capture), cfg_(cfg),
          board_(port.id(), port.name()), max_frame_(port.mtu() + kL2Overhead), rx_pfc_(cfg.pfc_rx) {
        board_.answers_queries = AnswersQueries<Upper>;
        host_due_ = host_.next_timer();
        if constexpr (BindsHost<Upper>) upper_.bind_host(host_);
        telemetry_add(&board_);
    }
    ~Nic() {
        while (backlog_n_) rte_pktmbuf_free(backlog_pop());
        rte_pktmbuf_free_bulk(stash_ + stash_lo_, kBurst - stash_lo_);
        flush();
        stats_.add(PortStat::DropTxFull, tx_n_ + (pfc_ != nullptr));
        rte_pktmbuf_free_bulk(tx_, tx_n_);
        rte_pktmbuf_free(pfc_);
        board_.publish(stats_, host_.counters());
        telemetry_remove(&board_);
    }
    Nic(const Nic&) = delete;
    Nic& operator=(const Nic&) = delete;

    // One turn of the loop. Returns the number of frames handled.
    uint16_t poll() {
        rte_mbuf* rx[kBurst];
        const auto room = static_cast<uint16_t>(std::min<uint32_t>(kBurst, kRxBacklog - backlog_n_));
        const uint16_t n = room ? rte_eth_rx_burst(port_.id(), 0, rx, room) : 0;
        // Never backwards: the TSC of the CPU this thread moved to may be
        // behind the last one read, and every timer and rate here assumes
        // time only grows.
        const Nanos t = clock_.now();
        if (t > now_) now_ = t;
        if (n) {
            stats_.add(PortStat::RxBursts);
            if (capture_) stats_.add(PortStat::CaptureLost, capture_->record(port_.id(), rx, n, false));
        }
        uint16_t handled = n;
        if (backlog_n_ == 0 && cfg_.rx_max_pps == 0) {
            for (uint16_t i = 0; i < n; ++i) receive(rx[i]);
        } else {
            for (uint16_t i = 0; i < n; ++i) backlog_push(rx[i]);
            handled = handle_backlog();
        }
        release_all();
        if (rx_pfc_.enabled()) check_rx_backlog();
        if (host_due_ <= now_) {
            host_.on_timer(now_, fx_);
            host_due_ = host_.next_timer();
        }
        drain_effects();
        if (upper_.next_timer() <= now_) upper_.on_timer(now_);
        pull_from_upper();
        if (tx_n_ && (tx_n_ == kBurst || now_ - last_flush_ >= cfg_.tx_drain)) flush();
        if (now_ - last_publish_ >= cfg_.publish_every) {
            board_.publish(stats_, host_.counters());
            host_due_ = host_.next_timer();  // bounds the delay of a timer set behind the loop's back
            if constexpr (AnswersQueries<Upper>) board_.mailbox().serve([this](CounterQuery& q) { upper_.answer(q); });
            last_publish_ = now_;
        }
        return handled;
    }

    // Offers every queued frame to the PMD now, a pending PFC frame first.
    // What its full queue does not take stays queued, first in line for the
    // next turn, and the loop pulls no more from the upper meanwhile: a NIC
    // stops fetching work when its wire is busy instead of dropping frames
    // its transport would have to retransmit after a timeout. Only when the
    // PMD has taken nothing for longer than tx_timeout does the watchdog
    // drop what is queued.
    void flush() {
        if (pfc_ && !send_pfc()) return refused();
        if (!tx_n_) return;
        const uint16_t sent = rte_eth_tx_burst(port_.id(), 0, tx_, tx_n_);
        last_flush_ = now_;
        if (sent == 0) return refused();
        stats_.add(PortStat::TxBursts);
        for (uint16_t i = 0; i < sent; ++i) stats_.add(PortStat::TxBytes, tx_len_[i]);
        stats_.add(PortStat::TxPackets, sent);
        tx_n_ -= sent;
        std::memmove(tx_, tx_ + sent, tx_n_ * sizeof tx_[0]);
        std::memmove(tx_len_, tx_len_ + sent, tx_n_ * sizeof tx_len_[0]);
        refused_since_ = Nanos::max();
        tx_stuck_logged_ = false;
    }

    host::PingStatus ping(uint32_t dst, uint16_t id, uint16_t seq, size_t payload_len, uint64_t cookie) {
        const host::PingStatus s = host_.ping(dst, id, seq, payload_len, now_, cookie, fx_);
        host_due_ = host_.next_timer();
        drain_effects();
        return s;
    }
    host::PathResult resolve_path(const host::AddressVector& av, uint64_t cookie) {
        host::PathResult r = host_.resolve_path(av, now_, cookie, fx_);
        host_due_ = host_.next_timer();
        drain_effects();
        return r;
    }
    void announce() {
        host_.announce(fx_);
        drain_effects();
    }

    // The lab knobs, changed while the NIC runs (loop thread only).
    void set_mark_ce_every(uint32_t n) { cfg_.mark_ce_every = n; }
    void set_rx_max_pps(uint64_t pps) {
        cfg_.rx_max_pps = pps;
        rx_epoch_ = now_;
        rx_since_epoch_ = 0;
    }
    // Frames received and not handled yet, in the PMD's queue (where it can
    // count them) and the loop's backlog.
    uint32_t rx_backlog() const { return backlog_n_ + pmd_rx_count(); }
    const RxPfc& rx_pfc() const { return rx_pfc_; }

    Nanos now() const { return now_; }
    const PortStats& stats() const { return stats_; }
    const CounterBoard& board() const { return board_; }
    // Publishes the counters to the board now (the loop does so every
    // publish_every): for a reader that wants every frame so far counted.
    // The loop thread only.
    void publish() { board_.publish(stats_, host_.counters()); }

private:
    // The PMD took nothing. The first refusal starts the watchdog; once it
    // has refused for longer than tx_timeout, every queued frame (and a
    // waiting PFC frame) is dropped and freed, which also takes zero-copy
    // chains off their MR's pin, and the next refusal starts a new wait.
    // The message is logged once until the PMD takes a frame again.
    void refused() {
        // A port without carrier (a memif or vhost peer not connected yet)
        // is not a stalled queue: as on a NIC, the watchdog runs with link up.
        if (!port_.link_up()) {
            refused_since_ = Nanos::max();
            return;
        }
        if (refused_since_ == Nanos::max()) {
            refused_since_ = now_;
            return;
        }
        if (cfg_.tx_timeout.v == 0 || now_ - refused_since_ <= cfg_.tx_timeout) return;
        const uint32_t dropped = tx_n_ + (pfc_ != nullptr);
        stats_.add(PortStat::DropTxTimeout, dropped);
        stats_.add(PortStat::TxTimeouts);
        if (!tx_stuck_logged_) warn_tx_timeout(port_.name(), now_ - refused_since_, dropped);
        tx_stuck_logged_ = true;
        rte_pktmbuf_free_bulk(tx_, tx_n_);
        tx_n_ = 0;
        rte_pktmbuf_free(pfc_);
        pfc_ = nullptr;
        refused_since_ = Nanos::max();
    }

    void receive(rte_mbuf* m) {
        stats_.add(PortStat::RxPackets);
        stats_.add(PortStat::RxBytes, rte_pktmbuf_pkt_len(m));
        if (m->nb_segs != 1) {
            receive_chain(m);
            return;
        }
        const std::span<uint8_t> frame(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m));
        const host::RxResult r = host_.on_frame(frame, now_, fx_);
        // Only ARP and echo traffic reaches the ARP cache, not RoCE.
        if (r.verdict == host::RxVerdict::Reply || r.verdict == host::RxVerdict::Consumed)
            host_due_ = host_.next_timer();
        switch (r.verdict) {
            case host::RxVerdict::Reply:
                m->data_len = r.reply_len;
                m->pkt_len = r.reply_len;
                enqueue(m);
                return;
            case host::RxVerdict::Transport:
                if (cfg_.mark_ce_every) mark_ce(frame);
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
        release(m);
    }

    // A chain goes to the host stack as its first segment, and only RoCEv2
    // passes (what the host stack answers in place needs one segment); the
    // upper reads the payload where each segment holds it.
    void receive_chain(rte_mbuf* m) {
        std::span<const uint8_t> segs[kMaxSegs];
        uint16_t n = 0;
        if (TakesChains<Upper> && m->nb_segs <= kMaxSegs)
            for (rte_mbuf* s = m; s; s = s->next) segs[n++] = {rte_pktmbuf_mtod(s, const uint8_t*), s->data_len};
        if (n == 0) {
            stats_.add(PortStat::DropMultiSegment);
            release(m);
            return;
        }
        const std::span<uint8_t> first(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m));
        const host::RxResult r = host_.on_frame(first, now_, fx_, rte_pktmbuf_pkt_len(m));
        if (r.verdict == host::RxVerdict::Transport) {
            if (cfg_.mark_ce_every) mark_ce(first);
            if constexpr (TakesChains<Upper>) upper_.on_roce_chain(std::span<const std::span<const uint8_t>>(segs, n), now_);
        }
        release(m);
    }

    // Handled mbufs go back to their pool in bulk.
    void release(rte_mbuf* m) {
        rx_done_[rx_done_n_++] = m;
        if (rx_done_n_ == kBurst) release_all();
    }
    void release_all() {
        rte_pktmbuf_free_bulk(rx_done_, rx_done_n_);
        rx_done_n_ = 0;
    }

    // Every mark_ce_every-th frame that carries ECT(0) or ECT(1) leaves as CE.
    void mark_ce(std::span<uint8_t> frame) {
        wire::EthView eth;
        if (!wire::parse_eth(frame, eth)) return;
        const uint8_t tos = frame[eth.l3_off + 1u];
        const uint8_t ecn = eth.l2.ethertype == wire::ethertype::kIpv4 ? tos & 3 : (tos >> 4) & 3;
        if (ecn == wire::ecn::kNotEct || ecn == wire::ecn::kCe) return;
        if (++ect_seen_ % cfg_.mark_ce_every) return;
        if (wire::set_ip_ecn(frame, wire::ecn::kCe)) stats_.add(PortStat::LabCeMarked);
    }

    void backlog_push(rte_mbuf* m) { backlog_[(backlog_head_ + backlog_n_++) & (kRxBacklog - 1)] = m; }
    rte_mbuf* backlog_pop() {
        rte_mbuf* m = backlog_[backlog_head_];
        backlog_head_ = (backlog_head_ + 1) & (kRxBacklog - 1);
        --backlog_n_;
        return m;
    }

    // Handles the backlog, within rx_max_pps when it is set. An empty
    // backlog earns no credit: the next frame waits its full 1/rx_max_pps.
    uint16_t handle_backlog() {
        uint32_t budget = backlog_n_;
        if (cfg_.rx_max_pps) {
            const auto allowed = static_cast<uint64_t>(static_cast<unsigned __int128>((now_ - rx_epoch_).v) *
                                                       cfg_.rx_max_pps / 1000000000u);
            budget = static_cast<uint32_t>(std::min<uint64_t>(budget, allowed - std::min(allowed, rx_since_epoch_)));
            budget = std::min<uint32_t>(budget, kBurst);
            rx_since_epoch_ += budget;
        }
        for (uint32_t i = 0; i < budget; ++i) receive(backlog_pop());
        if (backlog_n_ == 0) {
            rx_epoch_ = now_;
            rx_since_epoch_ = 0;
        }
        if (backlog_n_ > stats_[PortStat::RxBacklogMax]) stats_.set(PortStat::RxBacklogMax, backlog_n_);
        return static_cast<uint16_t>(budget);
    }

    uint32_t pmd_rx_count() const {
        if (!pmd_counts_rx_) return 0;
        const int c = rte_eth_rx_queue_count(port_.id(), 0);
        if (c < 0) pmd_counts_rx_ = false;
        return c > 0 ? static_cast<uint32_t>(c) : 0;
    }

    // A PFC frame does not queue behind the frames a full TX queue refused,
    // as a NIC's MAC sends pauses ahead of its queues: it waits alone and goes
    // to the PMD before them. A newer decision rewrites a frame still waiting
    // (only the latest pause state matters to the peer).
    void check_rx_backlog() {
        const RxPfc::Send s = rx_pfc_.on_backlog(rx_backlog(), now_);
        if (s != RxPfc::Send::None) {
            if (!pfc_) {
                pfc_ = rte_pktmbuf_alloc(port_.pool());
                if (!pfc_ || !rte_pktmbuf_append(pfc_, wire::kPfcFrameLen)) {
                    stats_.add(PortStat::DropNoMbuf);
                    rte_pktmbuf_free(pfc_);
                    pfc_ = nullptr;
                    return;
                }
            }
            rx_pfc_.encode(s, host_.config().mac, std::span(rte_pktmbuf_mtod(pfc_, uint8_t*), wire::kPfcFrameLen));
            pfc_kind_ = s;
        }
        if (pfc_) flush();  // a pause cannot wait for a fuller burst
    }

    // Hands the waiting PFC frame to the PMD; false if its queue is full.
    bool send_pfc() {
        if (rte_eth_tx_burst(port_.id(), 0, &pfc_, 1) == 0) return false;
        if (capture_) stats_.add(PortStat::CaptureLost, capture_->record(port_.id(), &pfc_, 1, true));
        const auto prio = static_cast<uint8_t>(rx_pfc_.config().priority);
        stats_.add(static_cast<PortStat>(
            static_cast<uint8_t>(pfc_kind_ == RxPfc::Send::Xoff ? PortStat::TxPfcXoffPrio0 : PortStat::TxPfcXonPrio0) +
            prio));
        stats_.add(PortStat::TxPackets);
        stats_.add(PortStat::TxBytes, wire::kPfcFrameLen);
        pfc_ = nullptr;
        return true;
    }

    void drain_effects() {
        if (fx_.empty()) return;
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
        host_due_ = host_.next_timer();  // an upper may have resolved a path in on_host_effect
    }

    // One burst per turn at most, so the frames of a turn are still in cache
    // when the peer (or the PMD) reads them: pulling the engine's whole
    // window at once walks megabytes of mbufs through the cache. Mbufs come
    // from a stash refilled in bulk, so an idle turn allocates nothing, and
    // each stashed mbuf's slot is set once, when it is allocated: a turn
    // that lends one frame does not describe 32 (a busy-polling requester
    // lends about one a turn).
    void pull_from_upper() {
        uint16_t room = kBurst - tx_n_;
        if (room == 0) return;
        if (stashed() < room) {
            refill_stash(room);
            room = std::min(room, stashed());
            if (room == 0) return;
        }
        const size_t n = upper_.pull_tx(std::span(stash_slot_ + stash_lo_, room), now_);
        if (n) stats_.add(PortStat::TxPulls);
        for (size_t i = 0; i < n; ++i, ++stash_lo_) {
            rte_mbuf* m = stash_[stash_lo_];
            TxSlot& s = stash_slot_[stash_lo_];
            if (s.len + (s.ext ? s.ext_len + s.tail_len : 0u) > max_frame_) [[unlikely]] {
                stats_.add(PortStat::DropTxOversize);
                if (s.ext) s.pin->fetch_sub(1, std::memory_order_release);
                rte_pktmbuf_free(m);
                continue;
            }
            m->data_len = static_cast<uint16_t>(s.len);
            m->pkt_len = s.len;
            if (s.ext) chain(m, s);
            enqueue(m);
        }
    }

    // A zero-copy frame leaves as a chain: its headers in `m`, then an mbuf
    // attached to the MR's bytes, then pad + ICRC in a third. The attached
    // mbuf's shared info lies in that mbuf's own (unused) data room, so it
    // lives exactly as long as the attachment, and its free callback takes
    // the frame off the MR's pin on whichever thread frees it last. Without
    // two mbufs for it, or on a port that sends no chains, the frame is made
    // whole in `m` (one copy, as before zero copy).
    void chain(rte_mbuf* m, TxSlot& s) {
        rte_mbuf* seg[2];
        if (!port_.takes_chains() || rte_pktmbuf_alloc_bulk(port_.pool(), seg, 2) != 0) {
            if (port_.takes_chains()) stats_.add(PortStat::TxZeroCopyShort);
            uint8_t* end = rte_pktmbuf_mtod(m, uint8_t*) + s.len;
            std::memcpy(end, s.ext, s.ext_len);
            std::memcpy(end + s.ext_len, s.tail, s.tail_len);
            m->data_len = static_cast<uint16_t>(s.len + s.ext_len + s.tail_len);
            m->pkt_len = m->data_len;
            s.pin->fetch_sub(1, std::memory_order_release);
            return;
        }
        auto* sh = rte_pktmbuf_mtod(seg[0], rte_mbuf_ext_shared_info*);
        sh->free_cb = unpin;
        sh->fcb_opaque = s.pin;
        rte_mbuf_ext_refcnt_set(sh, 1);
        rte_pktmbuf_attach_extbuf(seg[0], const_cast<uint8_t*>(s.ext), RTE_BAD_IOVA, static_cast<uint16_t>(s.ext_len),
                                  sh);
        seg[0]->data_len = static_cast<uint16_t>(s.ext_len);
        std::memcpy(rte_pktmbuf_mtod(seg[1], uint8_t*), s.tail, s.tail_len);
        seg[1]->data_len = s.tail_len;
        m->next = seg[0];
        seg[0]->next = seg[1];
        m->nb_segs = 3;
        m->pkt_len = s.len + s.ext_len + s.tail_len;
        stats_.add(PortStat::TxZeroCopy);
    }
    static void unpin(void*, void* pin) { static_cast<std::atomic<uint32_t>*>(pin)->fetch_sub(1, std::memory_order_release); }

    uint16_t stashed() const { return kBurst - stash_lo_; }

    // Lent mbufs leave the stash from the front, so the refill goes in
    // front of the ones left. The bulk refill is all or nothing. When the
    // pool is too short for it, the mbufs it still has are taken one by one,
    // up to what this turn can lend: a pool with a few free mbufs sends a few
    // frames, not none.
    void refill_stash(uint16_t want) {
        if (rte_pktmbuf_alloc_bulk(port_.pool(), stash_, stash_lo_) == 0) {
            for (uint16_t i = 0; i < stash_lo_; ++i) set_slot(i);
            stash_lo_ = 0;
            return;
        }
        stats_.add(PortStat::TxPoolShort);
        while (stashed() < want) {
            rte_mbuf* m = rte_pktmbuf_alloc(port_.pool());
            if (!m) return;
            stash_[--stash_lo_] = m;
            set_slot(stash_lo_);
        }
    }
    void set_slot(uint16_t i) {
        rte_mbuf* m = stash_[i];
        stash_slot_[i] = {std::span(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m)), 0};
    }

    void enqueue(rte_mbuf* m) {
        if (rte_pktmbuf_pkt_len(m) > max_frame_) [[unlikely]] {  // a host frame; pulled ones are checked before
            stats_.add(PortStat::DropTxOversize);
            rte_pktmbuf_free(m);
            return;
        }
        if (tx_n_ == kBurst) flush();
        if (tx_n_ == kBurst) {  // the PMD took nothing: no room even for an ARP reply
            stats_.add(PortStat::DropTxFull);
            rte_pktmbuf_free(m);
            return;
        }
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
    uint32_t max_frame_;  // the longest frame the port carries
    PortStats stats_;
    host::HostEffects fx_;
    rte_mbuf* tx_[kBurst];
    uint32_t tx_len_[kBurst];
    rte_mbuf* rx_done_[kBurst];  // handled, not yet freed
    uint16_t rx_done_n_ = 0;
    rte_mbuf* stash_[kBurst];  // [stash_lo_, kBurst): allocated, not yet lent to the upper
    TxSlot stash_slot_[kBurst];  // each stashed mbuf's data area
    uint16_t stash_lo_ = kBurst;
    uint16_t tx_n_ = 0;
    Nanos now_;
    Nanos last_flush_;
    Nanos refused_since_ = Nanos::max();  // the PMD's first refusal since it last took a frame
    bool tx_stuck_logged_ = false;
    Nanos last_publish_;
    // The host stack's next timer, kept here because finding it walks the
    // ARP cache: recomputed whenever ARP state may have changed.
    Nanos host_due_;
    RxPfc rx_pfc_;
    rte_mbuf* pfc_ = nullptr;  // a PFC frame the PMD's full queue has not taken yet
    RxPfc::Send pfc_kind_ = RxPfc::Send::None;
    std::array<rte_mbuf*, kRxBacklog> backlog_{};
    uint32_t backlog_head_ = 0;
    uint32_t backlog_n_ = 0;
    Nanos rx_epoch_;
    uint64_t rx_since_epoch_ = 0;
    uint64_t ect_seen_ = 0;
    mutable bool pmd_counts_rx_ = true;
};

}  // namespace rocemu::dpdk
