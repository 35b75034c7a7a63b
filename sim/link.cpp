#include "sim/link.hpp"

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::sim {

const char* to_string(LinkDrop d) {
    switch (d) {
        case LinkDrop::QueueFull: return "queue_full";
        case LinkDrop::LinkDown: return "link_down";
        case LinkDrop::Loss: return "loss";
        case LinkDrop::BadFcs: return "bad_fcs";
        case LinkDrop::kCount: break;
    }
    return "?";
}

Link::Link(LinkId id, LinkEnd src, LinkEnd dst, const LinkConfig& cfg, uint64_t seed, bool tx_ready)
    : id_(id),
      src_(src),
      dst_(dst),
      multipath_(cfg.paths.size() > 1),
      tx_ready_(tx_ready),
      ring_(16),
      rng_(seed),
      model_(cfg) {}

Link::Send Link::send(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool) {
    if (!up_) {
        drop(LinkDrop::LinkDown, h, pool);
        return Send::Dropped;
    }
    // A queued TxDone is the wire's end of the frame before, even when it
    // is due this nanosecond: frames keep their order behind it.
    if (!tx_event_ && queued_frames_ == 0 && model_.free_at(now)) {
        start(h, now, q, pool);
        return Send::Started;
    }
    const Bytes len{pool.len(h)};
    if (len.v > model_.config().queue_limit.v - queued_bytes_.v) {
        drop(LinkDrop::QueueFull, h, pool);
        return Send::Dropped;
    }
    ring_push(h);
    queued_bytes_ += len;
    if (!tx_event_) {
        // Only a link without tx_ready_ gets here: the frame it serialises
        // has no TxDone yet.
        tx_event_ = true;
        q.push(model_.busy_until(), EventKind::TxDone, id_, 0);
    }
    return Send::Queued;
}

bool Link::on_tx_done(Nanos now, EventQueue& q, FramePool& pool) {
    tx_event_ = false;
    if (queued_frames_ == 0) return tx_ready_;
    const FrameHandle h = ring_pop();
    queued_bytes_ -= Bytes{pool.len(h)};
    start(h, now, q, pool);
    return false;
}

FrameHandle Link::on_deliver(uint64_t arg, Nanos now, FramePool& pool) {
    const FrameHandle h{static_cast<uint32_t>(arg)};
    if (!up_ || static_cast<uint32_t>(arg >> 32) != epoch_) {
        drop(LinkDrop::LinkDown, h, pool);
        return FrameHandle{};
    }
    ++counters_.delivered_frames;
    counters_.delivered_bytes += pool.len(h);
    if (tapped_ && tap_rx_ != nullptr) tap_rx_->write(now, pool.frame(h));
    return h;
}

bool Link::set_up(bool up, FramePool& pool) {
    if (up_ == up) return false;
    up_ = up;
    if (up) return true;
    ++epoch_;
    while (queued_frames_ > 0) drop(LinkDrop::LinkDown, ring_pop(), pool);
    queued_bytes_ = Bytes{0};
    return true;
}

void Link::start(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool) {
    const uint32_t len = pool.len(h);
    const uint32_t key = multipath_ ? path_key(pool.headers(h)) : 0;
    const link::Delivery d = model_.transmit(Bytes{len}, now, rng_, key);
    if (tapped_ && tap_tx_ != nullptr) tap_tx_->write(d.tx_start, pool.frame(h));
    ++counters_.tx_frames;
    counters_.tx_bytes += len;
    if (tx_ready_ || queued_frames_ > 0) {
        tx_event_ = true;
        q.push(d.tx_end, EventKind::TxDone, id_, 0);
    }

    if (d.fate == link::Fate::LostLinkDown) return drop(LinkDrop::LinkDown, h, pool);
    if (d.fate == link::Fate::LostRandom) return drop(LinkDrop::Loss, h, pool);
    if (d.corruption == Corruption::BadFcs || (d.corruption == Corruption::BadIcrc && !corrupt_icrc(h, pool)))
        return drop(LinkDrop::BadFcs, h, pool);
    const uint64_t tag = uint64_t{epoch_} << 32;
    q.push(d.arrival, EventKind::Deliver, id_, tag | h.v);
    if (d.duplicate) {
        const FrameHandle copy = pool.clone(h);
        if (copy.valid()) {
            ++counters_.duplicated;
            q.push(d.arrival, EventKind::Deliver, id_, tag | copy.v);
        }
    }
}

// RoCE frames spread over the paths by UDP source port, as ECMP hashes
// them; everything else (PFC, ARP) takes path 0. `frame` may be headers only.
uint32_t Link::path_key(std::span<const uint8_t> frame) const {
    if (wire::classify(frame) != wire::FrameKind::Roce) return 0;
    wire::EthView eth;
    if (!wire::parse_eth(frame, eth)) return 0;
    const std::size_t l3 = eth.l3_off;
    const std::size_t udp = eth.l2.ethertype == wire::ethertype::kIpv4 ? l3 + (frame[l3] & 0x0F) * 4u : l3 + 40;
    if (frame.size() < udp + 2) return 0;
    return static_cast<uint32_t>(frame[udp] << 8 | frame[udp + 1]);
}

bool Link::corrupt_icrc(FrameHandle& h, FramePool& pool) {
    // The whole frame counts as written: a receiver that skips reading a
    // payload it knows to be zero must not skip this one. A compact frame
    // has no payload bytes to write into: it becomes a whole one.
    h = pool.whole(h);
    const std::span<uint8_t> f = pool.buffer(h, pool.len(h));
    wire::RocePacket pkt;
    if (wire::parse_roce(f, pkt, wire::ParseOptions{.verify_icrc = false}) != wire::ParseError::Ok) return false;
    // Payload bytes, or else the PSN: the parser checks neither against
    // anything but the ICRC, so the frame fails exactly there. A CRC-32
    // catches every single-byte error.
    std::size_t off;
    if (pkt.payload_len > 0)
        off = static_cast<std::size_t>(pkt.payload - f.data()) + rng_.below(pkt.payload_len);
    else
        off = pkt.bth_off + 9 + rng_.below(3);
    f[off] ^= static_cast<uint8_t>(1 + rng_.below(255));
    ++counters_.corrupted;
    return true;
}

void Link::drop(LinkDrop why, FrameHandle h, FramePool& pool) {
    ++counters_.drops[static_cast<std::size_t>(why)];
    pool.free(h);
}

void Link::ring_push(FrameHandle h) {
    if (queued_frames_ == ring_.size()) {
        std::vector<FrameHandle> bigger(ring_.size() * 2);
        for (uint32_t i = 0; i < queued_frames_; ++i) bigger[i] = ring_[(ring_head_ + i) & (ring_.size() - 1)];
        ring_.swap(bigger);
        ring_head_ = 0;
    }
    ring_[(ring_head_ + queued_frames_) & (ring_.size() - 1)] = h;
    ++queued_frames_;
}

FrameHandle Link::ring_pop() {
    const FrameHandle h = ring_[ring_head_];
    ring_head_ = (ring_head_ + 1) & static_cast<uint32_t>(ring_.size() - 1);
    --queued_frames_;
    return h;
}

}  // namespace rocemu::sim
