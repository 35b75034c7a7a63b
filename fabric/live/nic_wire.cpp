#include "fabric/live/nic_wire.hpp"

#include <algorithm>

#include "dataplane/wire/l2.hpp"

namespace rocemu::fabric::live {

namespace {

constexpr Bytes kPreambleIfg{20};
constexpr uint16_t kMacControl = 0x8808;

bool is_mac_control(const rte_mbuf* m) {
    const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
    return rte_pktmbuf_data_len(m) >= 14 && (p[12] << 8 | p[13]) == kMacControl;
}

}  // namespace

NicWire::NicWire(rte_ring* from_nic, rte_ring* to_switch, rte_ring* from_switch, rte_ring* to_nic, BitsPerSec speed,
                 Nanos propagation, int pfc_priority)
    : from_nic_(from_nic), to_switch_(to_switch), from_switch_(from_switch), to_nic_(to_nic), speed_(speed),
      propagation_(propagation), pause_(static_cast<uint8_t>(pfc_priority), speed) {
    flight_.reserve(kDelayCap);
}

NicWire::~NicWire() {
    if (head_) rte_pktmbuf_free(head_);
    for (size_t i = flight_head_; i < flight_.size(); ++i) rte_pktmbuf_free(flight_[i].m);
}

void NicWire::poll(Nanos now) {
    from_switch_to_nic(now);
    serialise(now);
    arrive(now);
}

void NicWire::from_switch_to_nic(Nanos now) {
    void* burst[kBurst];
    const unsigned room = rte_ring_free_count(to_nic_);
    const unsigned n = rte_ring_dequeue_burst(from_switch_, burst, std::min<unsigned>(kBurst, room), nullptr);
    for (unsigned i = 0; i < n; ++i) {
        auto* m = static_cast<rte_mbuf*>(burst[i]);
        if (!is_mac_control(m)) continue;
        wire::Pfc pfc;
        if (wire::parse_pfc({rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)}, pfc)) {
            pause_.on_pfc(pfc, now);
            ++c_.pfc_seen;
        }
    }
    if (n) rte_ring_enqueue_burst(to_nic_, burst, n, nullptr);
    c_.to_nic_frames += n;
}

void NicWire::serialise(Nanos now) {
    for (;;) {
        if (!head_) {
            void* m = nullptr;
            if (rte_ring_dequeue(from_nic_, &m) != 0) return;
            head_ = static_cast<rte_mbuf*>(m);
            head_seen_ = now;
        }
        const bool control = is_mac_control(head_);
        if (!control && pause_.paused(now)) {
            ++c_.held_turns;
            return;
        }
        // A backlog starts where the wire became free; an idle wire starts
        // when the frame was first seen. Either way no earlier than a pause's end.
        Nanos start = std::max(free_at_, head_seen_);
        if (!control) start = std::max(start, pause_.until());
        if (start > now) return;
        if (flight_.size() == kDelayCap) {
            ++c_.ring_full;
            return;
        }
        free_at_ = start + speed_.serialise(Bytes{rte_pktmbuf_pkt_len(head_)} + kPreambleIfg);
        flight_.push_back(InFlight{free_at_ + propagation_, head_});
        head_ = nullptr;
    }
}

void NicWire::arrive(Nanos now) {
    while (flight_head_ < flight_.size() && flight_[flight_head_].arrival <= now) {
        if (rte_ring_enqueue(to_switch_, flight_[flight_head_].m) != 0) {
            ++c_.ring_full;
            break;
        }
        ++flight_head_;
        ++c_.to_switch_frames;
    }
    if (flight_head_ == flight_.size()) {
        flight_.clear();
        flight_head_ = 0;
    } else if (flight_head_ > kDelayCap / 2) {
        flight_.erase(flight_.begin(), flight_.begin() + static_cast<std::ptrdiff_t>(flight_head_));
        flight_head_ = 0;
    }
}

}  // namespace rocemu::fabric::live
