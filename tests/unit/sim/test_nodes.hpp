// Small nodes the sim tests drive links with.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

#include "dataplane/wire/wire.hpp"
#include "sim/sim.hpp"

namespace rocemu::sim::test {

// A RoCEv2 RC SEND_ONLY frame with a correct ICRC.
// With `zero_payload` its payload is zeros.
inline std::vector<uint8_t> roce_frame(uint32_t psn, uint16_t sport, uint32_t payload_len, bool zero_payload = false) {
    std::vector<uint8_t> payload(payload_len);
    if (!zero_payload)
        for (uint32_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(psn * 7 + i);
    wire::RocePacket p;
    p.l2.dst = wire::MacAddr{{0x02, 0, 0, 0, 0, 2}};
    p.l2.src = wire::MacAddr{{0x02, 0, 0, 0, 0, 1}};
    p.l3.src = wire::IpAddr::from_v4(0x0A000001);
    p.l3.dst = wire::IpAddr::from_v4(0x0A000002);
    p.l3.ecn = wire::ecn::kEct0;
    p.udp_sport = sport;
    p.bth.opcode = wire::op::kRc | wire::op::SEND_ONLY;
    p.bth.dqpn = Qpn{0x11};
    p.bth.psn = Psn{psn};
    p.payload = payload.data();
    p.payload_len = payload_len;
    std::vector<uint8_t> out(wire::roce_frame_len(p));
    out.resize(wire::encode_roce(p, out));
    return out;
}

// A frame of `len` bytes whose first eight carry `index`.
// These tests time frames by their own bytes: no preamble or IFG on the wire.
inline LinkConfig bare_link() {
    LinkConfig c;
    c.wire_overhead = Bytes{0};
    return c;
}

inline std::vector<uint8_t> tagged_frame(uint64_t index, uint32_t len) {
    std::vector<uint8_t> f(len, 0xA5);
    std::memcpy(f.data(), &index, sizeof index);
    return f;
}

inline uint64_t tag_of(std::span<const uint8_t> f) {
    uint64_t v = 0;
    std::memcpy(&v, f.data(), sizeof v);
    return v;
}

inline FrameHandle make_frame(Simulator& sim, std::span<const uint8_t> bytes) {
    const FrameHandle h = sim.pool().alloc();
    if (!h.valid()) throw std::runtime_error("test frame pool exhausted");
    std::copy(bytes.begin(), bytes.end(), sim.pool().buffer(h).begin());
    sim.pool().set_len(h, static_cast<uint32_t>(bytes.size()));
    return h;
}

// A frame whose bytes from `head` up to its last 4 are zero, held compact
// (as the fabric's NICs send zero payloads).
inline FrameHandle make_compact_frame(Simulator& sim, std::span<const uint8_t> bytes, uint32_t head) {
    FramePool& pool = sim.pool();
    const FrameHandle h = pool.alloc();
    if (!h.valid()) throw std::runtime_error("test frame pool exhausted");
    std::copy(bytes.begin(), bytes.end(), pool.unmarked_buffer(h).begin());
    pool.settle_zero_payload(h, head, static_cast<uint32_t>(bytes.size()));
    const FrameHandle c = pool.compact(h);
    if (!c.compact()) throw std::runtime_error("test frame not compact");
    return c;
}

// Sends `count` frames made by `make(index)` out of port 0: back to back
// (the next one on every on_tx_ready) or all at once with burst(). Made with
// `hears_tx_ready` false it says it paces itself, and its link then tells
// it nothing (it cannot pull).
class Source : public Node {
public:
    using Make = std::function<std::vector<uint8_t>(uint64_t index)>;

    Source(Simulator& sim, uint64_t count, Make make, bool hears_tx_ready = true)
        : sim_(sim), id_(sim.add_node(*this)), count_(count), make_(std::move(make)), hears_(hears_tx_ready) {}

    NodeId id() const { return id_; }
    uint64_t sent() const { return next_; }
    uint64_t tx_ready_calls() const { return tx_ready_calls_; }

    void start() { send_next(); }
    void burst() {
        while (next_ < count_) send_next();
    }

    void on_frame(PortId, FrameHandle h, Nanos) override { sim_.pool().free(h); }
    void on_tx_ready(PortId, Nanos) override {
        ++tx_ready_calls_;
        if (pull_) send_next();
    }
    bool hears_tx_ready() const override { return hears_; }

    void set_pull(bool pull) { pull_ = pull; }
    // Frames are sent compact, zero from `head` up to their last 4 bytes.
    void set_compact_head(uint32_t head) { compact_head_ = head; }

private:
    void send_next() {
        if (next_ >= count_) return;
        const std::vector<uint8_t> bytes = make_(next_++);
        sim_.transmit(id_, 0, compact_head_ != 0 ? make_compact_frame(sim_, bytes, compact_head_) : make_frame(sim_, bytes));
    }

    Simulator& sim_;
    NodeId id_;
    uint64_t count_;
    Make make_;
    bool hears_;
    uint64_t next_ = 0;
    bool pull_ = true;
    uint32_t compact_head_ = 0;
    uint64_t tx_ready_calls_ = 0;
};

struct Arrival {
    PortId port;
    Nanos t;
    uint64_t tag;
    std::vector<uint8_t> bytes;  // only when the sink keeps them
};

class Sink : public Node {
public:
    explicit Sink(Simulator& sim, bool keep_bytes = false) : sim_(sim), id_(sim.add_node(*this)), keep_(keep_bytes) {}

    NodeId id() const { return id_; }
    const std::vector<Arrival>& got() const { return got_; }

    void on_frame(PortId port, FrameHandle h, Nanos now) override {
        const auto f = sim_.pool().frame(h);
        Arrival a{port, now, f.size() >= 8 ? tag_of(f) : 0, {}};
        if (keep_) a.bytes.assign(f.begin(), f.end());
        got_.push_back(std::move(a));
        sim_.pool().free(h);
    }

private:
    Simulator& sim_;
    NodeId id_;
    bool keep_;
    std::vector<Arrival> got_;
};

}  // namespace rocemu::sim::test
