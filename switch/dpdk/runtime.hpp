// The soft-switch's poll loop on DPDK ports: one lcore serves every port.
// Per turn: rx_burst on each port -> parse -> PacketDesc -> Switch::on_burst,
// the core's effects applied to the mbufs (L2 rewrite to the next hop, CE
// marks, drops, PFC frames sent ahead of data); timers; PFC storms; then per
// port, frames dequeued while the core's wire model says the wire is free,
// through the port's Link (loss, corruption, reordering, down/up, delay) to a
// TX buffer. The clock is read once per turn by the caller.
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <memory>
#include <vector>

#include "common/rng.hpp"
#include "dataplane/dpdk/capture.hpp"
#include "dataplane/dpdk/port.hpp"
#include "switch/dpdk/stats.hpp"
#include "switch/dpdk/telemetry.hpp"
#include "switch/link.hpp"
#include "switch/switch.hpp"

namespace rocemu::sw::live {

struct RuntimeOptions {
    bool ttl_decrement = false;
    uint64_t seed = 1;
    Nanos publish_every = Nanos::from_ms(1);
    bool telemetry = true;  // list the boards on the telemetry socket
};

// The first frame a port dropped on receipt for one reason (not_ip,
// truncated, multi_segment, no_handle, ttl_expired): its first bytes, so a
// log can say what it was.
struct DroppedFrame {
    static constexpr std::size_t kHead = 128;
    PortId port = 0;
    RtStat why = RtStat::kCount;
    uint32_t len = 0;   // the frame's length
    uint16_t head_len = 0;
    std::array<uint8_t, kHead> head{};
};

class SwitchRuntime {
public:
    static constexpr uint16_t kBurst = 32;

    // ports[i] and links[i] belong to switch port i. The switch, ports and
    // capture outlive the runtime.
    SwitchRuntime(Switch& sw, std::vector<dpdk::Port*> ports, std::vector<LinkConfig> links, dpdk::Capture* capture,
                  RuntimeOptions opt = {});
    ~SwitchRuntime();
    SwitchRuntime(const SwitchRuntime&) = delete;
    SwitchRuntime& operator=(const SwitchRuntime&) = delete;

    // One turn at time `now`. Returns the number of frames received.
    uint32_t poll(Nanos now);
    // Publishes every port's counters to its board now.
    void publish(Nanos now);

    std::size_t num_ports() const { return ports_.size(); }
    const RtPortStats& stats(PortId p) const { return ports_[p].st; }
    const Link& link(PortId p) const { return ports_[p].link; }
    const SwitchBoard& board(PortId p) const { return *ports_[p].board; }
    // Frames the runtime holds: queued in the core, on a delay line or in a TX buffer.
    std::size_t held() const { return handles_.size() - free_n_ + delayed_ + buffered_; }
    // Frames (data and PFC) the devices accepted, over all ports.
    uint64_t frames_sent() const { return frames_sent_; }
    // The first frame of each (port, reason) dropped on receipt, in the order dropped.
    const std::vector<DroppedFrame>& first_drops() const { return first_drops_; }

private:
    static constexpr uint16_t kTxCap = 2 * kBurst;
    static constexpr uint16_t kCtrlCap = 16;
    static constexpr std::size_t kDelayCap = 4096;

    struct Delayed {
        Nanos release;
        uint64_t seq;
        rte_mbuf* m;
    };
    struct PortRt {
        dpdk::Port* port = nullptr;
        wire::MacAddr mac;
        Link link;
        RtPortStats st;
        Nanos ready_at = Nanos::max();  // the core's TxReady
        std::vector<Delayed> delay;     // min-heap on (release, seq), capacity kDelayCap
        std::array<rte_mbuf*, kCtrlCap> ctrl{};
        uint16_t ctrl_n = 0;
        std::array<rte_mbuf*, kTxCap> tx{};
        uint16_t tx_n = 0;
        // Bytes of ctrl[0, ctrl_n) and tx[0, tx_n): TxBytes counts what a
        // tx_burst took without reading every mbuf's length again.
        uint64_t ctrl_bytes = 0;
        uint64_t tx_bytes = 0;
        std::unique_ptr<SwitchBoard> board;
    };

    void receive(PortId p, Nanos now);
    void apply();
    void send_pfc(PortId p, const PfcFrameDesc& pfc);
    void transmit(PortId p, Nanos now);
    void deliver(PortId p, const TxDesc& tx, Nanos now);
    void deliver_plain(PortRt& r, std::size_t n, Nanos now);
    void hold(PortRt& r, rte_mbuf* m, Nanos release, Nanos now);
    void flush(PortId p, Nanos now);
    void queue_tx(PortRt& r, rte_mbuf* m);
    rte_mbuf* take(uint32_t handle);
    [[gnu::cold]] void keep_first_drop(PortId p, RtStat why, const rte_mbuf* m);
    using L2Header = std::array<uint8_t, 12>;
    const L2Header& l2_header(uint32_t neighbor);

    Switch& sw_;
    std::vector<PortRt> ports_;
    dpdk::Capture* capture_;
    RuntimeOptions opt_;
    Rng rng_;
    Effects fx_;
    std::vector<rte_mbuf*> handles_;  // handle -> mbuf queued in the core
    std::vector<uint32_t> free_;      // free handles: a stack of free_n_, sized for all of them
    std::size_t free_n_ = 0;
    std::size_t delayed_ = 0;
    std::size_t buffered_ = 0;
    uint64_t frames_sent_ = 0;
    uint64_t seq_ = 0;
    Nanos last_publish_{};
    std::vector<uint64_t> scratch_;
    std::array<PacketDesc, kBurst> descs_{};
    std::array<uint32_t, kBurst> next_hop_{};  // on_burst's next hop of descs_[j]
    std::array<TxDesc, kBurst> txs_{};
    std::vector<L2Header> l2_;  // per neighbor id: its MAC, then its port's
    std::vector<DroppedFrame> first_drops_;  // capacity for every (port, receive reason): never grows on the drop path
};

}  // namespace rocemu::sw::live
