#include "sim/link.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/wire.hpp"

namespace rocemu::sim {

namespace {

constexpr uint64_t kPsPerSecond = 1000000000000ull;
// Rates outside this range are not links anyone builds; the upper bound also
// keeps the picosecond arithmetic of a 9216-byte frame within 64 bits.
constexpr uint64_t kMinRate = 1000000ull;            // 1 Mbit/s
constexpr uint64_t kMaxRate = 10000000000000ull;     // 10 Tbit/s
constexpr int64_t kMaxDelay = 1000000000;            // 1 s

std::string range_error(const char* key, const std::string& value, const char* range) {
    return fmt::format("link.{} = {}: must be {}", key, value, range);
}

bool probability_ok(double p) { return std::isfinite(p) && p >= 0.0 && p <= 1.0; }

}  // namespace

std::string validate(const LinkConfig& cfg) {
    if (cfg.rate.v < kMinRate || cfg.rate.v > kMaxRate)
        return range_error("rate", fmt::format("{} bit/s", cfg.rate.v), "in [1e6, 1e13] bit/s");
    if (cfg.propagation.v < 0 || cfg.propagation.v > kMaxDelay)
        return range_error("propagation", fmt::format("{} ns", cfg.propagation.v), "in [0, 1e9] ns");
    for (std::size_t i = 0; i < cfg.paths.size(); ++i)
        if (cfg.paths[i].v < 0 || cfg.paths[i].v > kMaxDelay)
            return range_error(fmt::format("paths[{}]", i).c_str(), fmt::format("{} ns", cfg.paths[i].v),
                               "in [0, 1e9] ns");
    if (cfg.jitter.v < 0 || cfg.jitter.v > kMaxDelay)
        return range_error("jitter", fmt::format("{} ns", cfg.jitter.v), "in [0, 1e9] ns");
    if (!probability_ok(cfg.loss)) return range_error("loss", fmt::format("{}", cfg.loss), "in [0, 1]");
    if (!probability_ok(cfg.duplicate))
        return range_error("duplicate", fmt::format("{}", cfg.duplicate), "in [0, 1]");
    if (!probability_ok(cfg.corrupt)) return range_error("corrupt", fmt::format("{}", cfg.corrupt), "in [0, 1]");
    return {};
}

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

Link::Link(LinkId id, LinkEnd src, LinkEnd dst, const LinkConfig& cfg, uint64_t seed)
    : id_(id), src_(src), dst_(dst), ring_(16), rng_(seed), cfg_(cfg) {
    const std::size_t k = std::max<std::size_t>(cfg_.paths.size(), 1);
    for (std::size_t i = 0; i < k; ++i) last_arrival_.push_back(Nanos{0});
}

Link::Send Link::send(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool) {
    if (!up_) {
        drop(LinkDrop::LinkDown, h, pool);
        return Send::Dropped;
    }
    if (!transmitting_) {
        start(h, now, q, pool);
        return Send::Started;
    }
    const Bytes len{pool.len(h)};
    if (len.v > cfg_.queue_limit.v - queued_bytes_.v) {
        drop(LinkDrop::QueueFull, h, pool);
        return Send::Dropped;
    }
    ring_push(h);
    queued_bytes_ += len;
    return Send::Queued;
}

bool Link::on_tx_done(Nanos now, EventQueue& q, FramePool& pool) {
    transmitting_ = false;
    if (queued_frames_ == 0) return true;
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
    if (tap_rx_ != nullptr) tap_rx_->write(now, pool.frame(h));
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

Nanos Link::busy_until_ceil() const { return Nanos{(busy_ps_ + (busy_frac_ != 0 ? 1 : 0) + 999) / 1000}; }

void Link::start(FrameHandle h, Nanos now, EventQueue& q, FramePool& pool) {
    // A frame handed over in the nanosecond the previous one ended follows it
    // back to back from its exact end, so a sender that refills the link on
    // every TxDone loses nothing to rounding.
    if (busy_until_ceil() < now) {
        busy_ps_ = now.v * 1000;
        busy_frac_ = 0;
    }
    if (tap_tx_ != nullptr) tap_tx_->write(Nanos{busy_ps_ / 1000}, pool.frame(h));

    const uint32_t len = pool.len(h);
    const uint64_t total = busy_frac_ + uint64_t{len} * 8 * kPsPerSecond;
    busy_ps_ += static_cast<int64_t>(total / cfg_.rate.v);
    busy_frac_ = total % cfg_.rate.v;
    transmitting_ = true;
    ++counters_.tx_frames;
    counters_.tx_bytes += len;
    const Nanos tx_end = busy_until_ceil();
    q.push(tx_end, EventKind::TxDone, id_, 0);

    // The random draws happen in a fixed order per frame, so a link's fate
    // sequence depends only on its seed and the frames it carried.
    if (rng_.chance(cfg_.loss)) {
        drop(LinkDrop::Loss, h, pool);
        return;
    }
    if (rng_.chance(cfg_.corrupt) && !corrupt(h, pool)) {
        drop(LinkDrop::BadFcs, h, pool);
        return;
    }
    const std::size_t path = cfg_.paths.size() > 1 ? pick_path(pool.frame(h)) : 0;
    Nanos arrival = tx_end + (cfg_.paths.empty() ? cfg_.propagation : cfg_.paths[path]);
    if (cfg_.jitter.v > 0) {
        arrival += Nanos{static_cast<int64_t>(rng_.below(static_cast<uint64_t>(cfg_.jitter.v) + 1))};
        if (!cfg_.jitter_reorders) arrival = std::max(arrival, last_arrival_[path]);
    }
    last_arrival_[path] = arrival;
    const uint64_t tag = uint64_t{epoch_} << 32;
    q.push(arrival, EventKind::Deliver, id_, tag | h.v);
    if (rng_.chance(cfg_.duplicate)) {
        const FrameHandle copy = pool.clone(h);
        if (copy.valid()) {
            ++counters_.duplicated;
            q.push(arrival, EventKind::Deliver, id_, tag | copy.v);
        }
    }
}

std::size_t Link::pick_path(std::span<const uint8_t> frame) const {
    if (wire::classify(frame) != wire::FrameKind::Roce) return 0;
    wire::EthView eth;
    if (!wire::parse_eth(frame, eth)) return 0;
    const std::size_t l3 = eth.l3_off;
    const std::size_t udp = eth.l2.ethertype == wire::ethertype::kIpv4 ? l3 + (frame[l3] & 0x0F) * 4u : l3 + 40;
    if (frame.size() < udp + 2) return 0;
    const uint16_t sport = static_cast<uint16_t>(frame[udp] << 8 | frame[udp + 1]);
    return sport % cfg_.paths.size();
}

bool Link::corrupt(FrameHandle h, FramePool& pool) {
    if (cfg_.corrupt_mode == CorruptMode::Fcs) return false;
    const std::span<uint8_t> f = pool.frame(h);
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
