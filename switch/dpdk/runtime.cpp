#include "switch/dpdk/runtime.hpp"

#include <rte_ethdev.h>
#include <rte_prefetch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "dataplane/wire/l2.hpp"
#include "switch/dpdk/frame.hpp"

namespace rocemu::sw::live {

namespace {
// Handles cover every mbuf the ports' pools hold, so a received frame always gets one.
constexpr std::size_t kHandlesPerPort = 8192;
// What receive drops a frame for (each port keeps the first of each).
constexpr std::array kReceiveDrops{RtStat::DropNotIp, RtStat::DropTruncated, RtStat::DropMultiSegment,
                                   RtStat::DropNoHandle, RtStat::DropTtlExpired};

// receive prefetches the headers of the frame this many ahead.
constexpr uint16_t kAhead = 4;

std::span<uint8_t> bytes(rte_mbuf* m) { return {rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m)}; }

bool later(const auto& a, const auto& b) { return a.release != b.release ? a.release > b.release : a.seq > b.seq; }

// A queued frame's mbuf out of the handle table, the handle back on the free
// stack. Loops pass the table and the stack in locals: through the members,
// the compiler reloaded them a frame.
[[gnu::always_inline]] inline rte_mbuf* take_from(rte_mbuf** handles, uint32_t* free, std::size_t& free_n,
                                                  uint32_t handle) {
    rte_mbuf* m = handles[handle];
    handles[handle] = nullptr;
    free[free_n++] = handle;
    return m;
}
// What receive's fast loop reads and updates.
struct FastRx {
    rte_mbuf* const* rx;
    uint16_t n;
    PortId port;
    uint32_t* free;
    std::size_t free_n;
    rte_mbuf** handles;
    PacketDesc* descs;
    rte_mbuf** data;
    std::size_t nd = 0;
    uint64_t rx_bytes = 0;
};

// The frames receive's general loop would take as data through
// parse_frame's fast path, from the first while they come: the same
// descriptors and handles. Returns where it stopped (the first other frame,
// or n). Its own function without a call in it: inside receive, the calls
// of the other cases kept the loop's variables on the stack.
[[gnu::noinline]] uint16_t take_fast(FastRx& s) {
    rte_mbuf* const* const rx = s.rx;
    const uint16_t n = s.n;
    uint32_t* const free = s.free;
    rte_mbuf** const handles = s.handles;
    PacketDesc* const descs = s.descs;
    rte_mbuf** const data = s.data;
    const PortId port = s.port;
    std::size_t free_n = s.free_n;
    std::size_t nd = 0;
    uint64_t rx_bytes = 0;
    // Each frame taken takes a handle: past the free ones, the general loop
    // counts the rest as DropNoHandle.
    const uint16_t lim = static_cast<uint16_t>(std::min<std::size_t>(n, free_n));
    // The loop's tail has no frame kAhead further on to prefetch.
    const uint16_t ahead = lim > kAhead ? lim - kAhead : 0;
    uint16_t i = 0;
    for (; i < lim; ++i) {
        rte_mbuf* m = rx[i];
        if (i < ahead) rte_prefetch0(rte_pktmbuf_mtod(rx[i + kAhead], void*));
        if (m->nb_segs != 1) break;
        const uint32_t h = free[free_n - 1];
        if (!parse_ipv4_fast(bytes(m), port, h, descs[nd])) break;
        rx_bytes += rte_pktmbuf_data_len(m);  // its pkt_len: one segment
        --free_n;
        handles[h] = m;
        data[nd++] = m;
    }
    s.free_n = free_n;
    s.nd = nd;
    s.rx_bytes = rx_bytes;
    return i;
}
}  // namespace

SwitchRuntime::SwitchRuntime(Switch& sw, std::vector<dpdk::Port*> ports, std::vector<LinkConfig> links,
                             dpdk::Capture* capture, RuntimeOptions opt)
    : sw_(sw), capture_(capture), opt_(opt), rng_(opt.seed) {
    ports_.reserve(ports.size());
    for (std::size_t i = 0; i < ports.size(); ++i) {
        ports_.push_back(PortRt{.port = ports[i], .mac = ports[i]->mac(), .link = Link(links[i])});
        PortRt& r = ports_.back();
        r.delay.reserve(kDelayCap);
        r.board = std::make_unique<SwitchBoard>(static_cast<uint16_t>(i), sw.config().ports[i].name, ports[i]->name());
        if (opt_.telemetry) telemetry_add(r.board.get());
    }
    handles_.assign(kHandlesPerPort * ports_.size(), nullptr);
    free_.resize(handles_.size());
    for (std::size_t h = handles_.size(); h-- > 0;) free_[free_n_++] = static_cast<uint32_t>(h);
    scratch_.resize(port_counter_names().size());
    first_drops_.reserve(ports_.size() * kReceiveDrops.size());
    if (const std::size_t nn = sw_.routes().num_neighbors()) l2_header(static_cast<uint32_t>(nn - 1));
}

void SwitchRuntime::keep_first_drop(PortId p, RtStat why, const rte_mbuf* m) {
    if (first_drops_.size() == first_drops_.capacity()) return;
    DroppedFrame& d = first_drops_.emplace_back();
    d.port = p;
    d.why = why;
    d.len = rte_pktmbuf_pkt_len(m);
    d.head_len = static_cast<uint16_t>(std::min<std::size_t>(rte_pktmbuf_data_len(m), DroppedFrame::kHead));
    std::memcpy(d.head.data(), rte_pktmbuf_mtod(m, const uint8_t*), d.head_len);
}

SwitchRuntime::~SwitchRuntime() {
    for (PortRt& r : ports_) {
        for (uint16_t i = 0; i < r.ctrl_n; ++i) rte_pktmbuf_free(r.ctrl[i]);
        for (uint16_t i = 0; i < r.tx_n; ++i) rte_pktmbuf_free(r.tx[i]);
        for (const Delayed& d : r.delay) rte_pktmbuf_free(d.m);
        if (opt_.telemetry) telemetry_remove(r.board.get());
    }
    for (rte_mbuf* m : handles_)
        if (m) rte_pktmbuf_free(m);
}

// take and queue_tx run once a frame: as calls, deliver cost 166 instead of
// 137 instructions a frame (callgrind, switch_bench net_ring 64 B).
[[gnu::always_inline]] inline rte_mbuf* SwitchRuntime::take(uint32_t handle) {
    return take_from(handles_.data(), free_.data(), free_n_, handle);
}

uint32_t SwitchRuntime::poll(Nanos now) {
    uint32_t received = 0;
    for (PortId p = 0; p < ports_.size(); ++p) {
        const std::size_t before = ports_[p].st[RtStat::RxFrames];
        receive(p, now);
        received += static_cast<uint32_t>(ports_[p].st[RtStat::RxFrames] - before);
    }
    while (sw_.next_timer() <= now) {
        sw_.on_timer(now, fx_);
        apply();
    }
    for (PortId p = 0; p < ports_.size(); ++p) {
        while (const auto f = ports_[p].link.poll_storm(now)) send_pfc(p, *f);
        transmit(p, now);
        flush(p, now);
    }
    if (now - last_publish_ >= opt_.publish_every) publish(now);
    return received;
}

void SwitchRuntime::receive(PortId p, Nanos now) {
    PortRt& r = ports_[p];
    rte_mbuf* rx[kBurst];
    const uint16_t n = rte_eth_rx_burst(r.port->id(), 0, rx, kBurst);
    if (!n) return;
    if (capture_) capture_->record(r.port->id(), rx, n, false);
    // The headers of the first frames are fetched while the first is parsed.
    for (uint16_t i = 0; i < n && i < kAhead; ++i) rte_prefetch0(rte_pktmbuf_mtod(rx[i], void*));
    std::size_t nd = 0;
    uint64_t rx_bytes = 0;
    PfcFrameDesc pfc;
    // descs_[j]'s frame, for the L2 rewrite after on_burst.
    rte_mbuf* data[kBurst];
    // In locals for the loop: parse_frame's byte stores could alias the
    // members, which the compiler then reloads a frame.
    const bool ttl = opt_.ttl_decrement;
    uint32_t* const free = free_.data();
    rte_mbuf** const handles = handles_.data();
    std::size_t free_n = free_n_;
    uint16_t i = 0;
    if (!ttl) {
        FastRx f{rx, n, p, free, free_n, handles, descs_.data(), data};
        i = take_fast(f);
        nd = f.nd;
        free_n = f.free_n;
        rx_bytes = f.rx_bytes;
    }
    for (; i < n; ++i) {
        rte_mbuf* m = rx[i];
        if (i + kAhead < n) rte_prefetch0(rte_pktmbuf_mtod(rx[i + kAhead], void*));
        rx_bytes += rte_pktmbuf_pkt_len(m);
        RtStat drop = RtStat::kCount;
        if (m->nb_segs != 1) {
            drop = RtStat::DropMultiSegment;
        } else {
            PacketDesc& d = descs_[nd];
            // The handle the frame gets if it is taken, written by the parse
            // (not written twice); taken off the stack only then.
            const uint32_t next = free_n ? free[free_n - 1] : 0;
            switch (parse_frame(bytes(m), p, next, d, pfc)) {
                case RxKind::Data:
                    if (ttl && decrement_ttl(bytes(m)) == TtlResult::Expired) drop = RtStat::DropTtlExpired;
                    else if (free_n == 0) drop = RtStat::DropNoHandle;
                    else {
                        --free_n;
                        handles[next] = m;
                        data[nd++] = m;
                        continue;
                    }
                    break;
                case RxKind::Pfc:
                    r.st.add(RtStat::RxPfc);
                    sw_.on_pfc(p, pfc, now, fx_);
                    free_n_ = free_n;  // apply() may free handles
                    apply();
                    free_n = free_n_;
                    rte_pktmbuf_free(m);
                    continue;
                case RxKind::Pause:
                    r.st.add(RtStat::RxPause);
                    rte_pktmbuf_free(m);
                    continue;
                case RxKind::NotIp: drop = RtStat::DropNotIp; break;
                case RxKind::Truncated: drop = RtStat::DropTruncated; break;
            }
        }
        if (r.st[drop] == 0) keep_first_drop(p, drop, m);
        r.st.add(drop);
        rte_pktmbuf_free(m);
    }
    free_n_ = free_n;
    r.st.add(RtStat::RxFrames, n);
    r.st.add(RtStat::RxBytes, rx_bytes);
    // The core writes each enqueued frame's next hop by burst position, not
    // as an Enqueued effect a frame: the rewrite needs no walk of effects.
    for (std::size_t done = 0; done < nd;) {
        const std::size_t took = sw_.on_burst(descs_.data() + done, nd - done, now, rng_, fx_, next_hop_.data() + done);
        const L2Header* l2 = l2_.data();
        std::size_t known = l2_.size();
        for (std::size_t j = done; j < done + took; ++j) {
            const uint32_t nb = next_hop_[j];
            // kNotEnqueued is above every neighbor id: one test for both.
            if (nb >= known) [[unlikely]] {
                if (nb == Switch::kNotEnqueued) continue;
                // a neighbor's first frame: its header is built (l2_ may move)
                l2_header(nb);
                l2 = l2_.data();
                known = l2_.size();
            }
            std::memcpy(rte_pktmbuf_mtod(data[j], uint8_t*), l2[nb].data(), sizeof(L2Header));
        }
        done += took;
        apply();
    }
}

// Destination = the neighbor's MAC, source = its port's: both fixed once the
// neighbor exists, so each is built once and copied as 12 bytes per frame.
const SwitchRuntime::L2Header& SwitchRuntime::l2_header(uint32_t neighbor) {
    while (l2_.size() <= neighbor) {
        const Neighbor& nb = sw_.routes().neighbor(static_cast<uint32_t>(l2_.size()));
        L2Header h{};
        rewrite_l2(h, nb.mac, nb.port < ports_.size() ? ports_[nb.port].mac : wire::MacAddr{});
        l2_.push_back(h);
    }
    return l2_[neighbor];
}

void SwitchRuntime::apply() {
    for (const Effect& e : fx_) {
        switch (e.kind) {
            // on_burst writes next hops instead (receive() rewrites L2 from them);
            // nothing else the runtime calls enqueues.
            case EffectKind::Enqueued: break;
            case EffectKind::Drop: rte_pktmbuf_free(take(e.handle)); break;
            case EffectKind::MarkCe: wire::set_ip_ecn(bytes(handles_[e.handle]), kEcnCe); break;
            case EffectKind::SendPfc: send_pfc(e.port, e.pfc); break;
            case EffectKind::TxReady: ports_[e.port].ready_at = e.at; break;
            case EffectKind::WatchdogStorm:
            case EffectKind::WatchdogRestore: spdlog::warn("{}", sw_.describe(e)); break;
        }
    }
    fx_.clear();
}

void SwitchRuntime::send_pfc(PortId p, const PfcFrameDesc& pfc) {
    PortRt& r = ports_[p];
    rte_mbuf* m = r.ctrl_n < kCtrlCap ? rte_pktmbuf_alloc(r.port->pool()) : nullptr;
    char* data = m ? rte_pktmbuf_append(m, wire::kPfcFrameLen) : nullptr;
    if (!data) {
        r.st.add(RtStat::PfcNoMbuf);
        rte_pktmbuf_free(m);
        return;
    }
    build_pfc(pfc, r.mac, std::span(reinterpret_cast<uint8_t*>(data), wire::kPfcFrameLen));
    if (capture_) capture_->record(r.port->id(), &m, 1, true);
    r.ctrl[r.ctrl_n++] = m;
    r.ctrl_bytes += wire::kPfcFrameLen;
    ++buffered_;
}

[[gnu::always_inline]] inline void SwitchRuntime::queue_tx(PortRt& r, rte_mbuf* m) {
    if (capture_) capture_->record(r.port->id(), &m, 1, true);
    r.tx[r.tx_n++] = m;
    r.tx_bytes += rte_pktmbuf_pkt_len(m);
    ++buffered_;
}

// The core paces the port: a frame may start when its TxReady time has come
// and the wire is free. Frames are dequeued at their own start times (which
// trail `now` when the loop was busy), so the rate over time is the port's.
void SwitchRuntime::transmit(PortId p, Nanos now) {
    PortRt& r = ports_[p];
    for (;;) {
        // Each frame leaves through the TX buffer or the delay line.
        const std::size_t max =
            r.tx_n < kBurst ? std::min<std::size_t>(kBurst - r.tx_n, kDelayCap - r.delay.size()) : 0;
        if (r.ready_at > now || max == 0) return;
        const Nanos from = std::max(r.ready_at, sw_.tx_free_at(p));
        if (from > now) {
            r.ready_at = from;
            return;
        }
        r.ready_at = Nanos::max();
        const std::size_t n = sw_.dequeue_burst(p, from, now, txs_.data(), max, rng_, fx_);
        // Usually the only effect is this port's re-arming: no need to walk the list.
        if (fx_.size() == 1 && fx_[0].kind == EffectKind::TxReady && fx_[0].port == p) {
            r.ready_at = fx_[0].at;
            fx_.clear();
        } else {
            apply();
        }
        if (!n) continue;
        if (r.link.plain()) deliver_plain(r, n, now);
        else
            for (std::size_t i = 0; i < n; ++i) deliver(p, txs_[i], now);
    }
}

// A frame due at `release`: into the TX buffer when due and nothing is
// waiting before it, else onto the delay line.
[[gnu::always_inline]] inline void SwitchRuntime::hold(PortRt& r, rte_mbuf* m, Nanos release, Nanos now) {
    if (release <= now && r.delay.empty()) {
        queue_tx(r, m);
        return;
    }
    r.delay.push_back(Delayed{release, seq_++, m});
    std::push_heap(r.delay.begin(), r.delay.end(), [](const Delayed& a, const Delayed& b) { return later(a, b); });
    ++delayed_;
}

// Inlined into transmit's per-frame loop: as a call it cost 24 more
// instructions a frame (callgrind, switch_bench net_ring 64 B: 1046 -> 1022).
[[gnu::always_inline]] inline void SwitchRuntime::deliver(PortId p, const TxDesc& tx, Nanos now) {
    PortRt& r = ports_[p];
    rte_mbuf* m = take(tx.handle);
    const LinkDelivery d = r.link.transmit(tx.frame_len, tx.start, rng_);
    RtStat drop = RtStat::kCount;
    if (d.fate == LinkFate::LostLinkDown) drop = RtStat::DropLinkDown;
    else if (d.fate == LinkFate::LostRandom) drop = RtStat::DropLinkLoss;
    else if (d.corruption == Corruption::BadFcs) drop = RtStat::DropLinkFcs;
    if (drop != RtStat::kCount) {
        r.st.add(drop);
        rte_pktmbuf_free(m);
        return;
    }
    if (d.corruption == Corruption::BadIcrc && corrupt_icrc(bytes(m))) r.st.add(RtStat::CorruptIcrc);
    // Serialisation is the core's pacing; the device gets the frame when it
    // starts on the wire, plus the propagation (and any reordering) delay.
    hold(r, m, tx.start + (d.arrival - d.tx_end), now);
}

// txs_[0, n) on a link that only times frames (Link::plain()): the link
// times the burst in one call and every frame is released
// propagation_delay() after it starts. Starts rise through a burst, so when
// the last frame is due and the delay line is empty the whole burst goes to
// the TX buffer, captured in one call.
void SwitchRuntime::deliver_plain(PortRt& r, std::size_t n, Nanos now) {
    const std::span<const TxDesc> burst(txs_.data(), n);
    r.link.transmit_plain(burst, [](const TxDesc& t) { return t.frame_len; }, [](const TxDesc& t) { return t.start; });
    const Nanos delay = r.link.propagation_delay();
    if (r.delay.empty() && burst.back().start + delay <= now) {
        rte_mbuf** out = r.tx.data() + r.tx_n;
        uint64_t bytes = 0;
        rte_mbuf** const handles = handles_.data();
        uint32_t* const free = free_.data();
        std::size_t free_n = free_n_;
        for (std::size_t i = 0; i < n; ++i) {
            out[i] = take_from(handles, free, free_n, burst[i].handle);
            bytes += burst[i].frame_len.v;
        }
        free_n_ = free_n;
        r.tx_bytes += bytes;
        if (capture_) capture_->record(r.port->id(), out, static_cast<uint16_t>(n), true);
        r.tx_n = static_cast<uint16_t>(r.tx_n + n);
        buffered_ += n;
        return;
    }
    for (const TxDesc& t : burst) hold(r, take(t.handle), t.start + delay, now);
}

// PFC first, data only once every PFC frame is out. What the device does not
// take stays buffered for the next turn: nothing queued is dropped here.
void SwitchRuntime::flush(PortId p, Nanos now) {
    PortRt& r = ports_[p];
    while (!r.delay.empty() && r.delay.front().release <= now && r.tx_n < kTxCap) {
        std::pop_heap(r.delay.begin(), r.delay.end(), [](const Delayed& a, const Delayed& b) { return later(a, b); });
        rte_mbuf* m = r.delay.back().m;
        r.delay.pop_back();
        --delayed_;
        queue_tx(r, m);
    }
    const auto send = [&](rte_mbuf** pkts, uint16_t& n, uint64_t& bytes, bool pfc) {
        if (!n) return;
        const uint16_t sent = rte_eth_tx_burst(r.port->id(), 0, pkts, n);
        uint64_t left = 0;
        for (uint16_t i = sent; i < n; ++i) left += rte_pktmbuf_pkt_len(pkts[i]);
        r.st.add(RtStat::TxFrames, sent);
        r.st.add(RtStat::TxBytes, bytes - left);
        bytes = left;
        if (pfc) r.st.add(RtStat::TxPfc, sent);
        std::copy(pkts + sent, pkts + n, pkts);
        n = static_cast<uint16_t>(n - sent);
        buffered_ -= sent;
        frames_sent_ += sent;
    };
    send(r.ctrl.data(), r.ctrl_n, r.ctrl_bytes, true);
    if (!r.ctrl_n) send(r.tx.data(), r.tx_n, r.tx_bytes, false);
}

void SwitchRuntime::publish(Nanos now) {
    for (PortId p = 0; p < ports_.size(); ++p) {
        collect_port_counters(sw_, p, now, ports_[p].st, ports_[p].link.counters(), scratch_);
        ports_[p].board->publish(scratch_);
    }
    last_publish_ = now;
}

}  // namespace rocemu::sw::live
