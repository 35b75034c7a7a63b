#include "fabric/switch_node.hpp"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::fabric {

namespace {

constexpr std::size_t kIpv4MinHeader = 20;

// Reads what the core routes on from an IPv4 frame; false if it is not one.
bool describe_ipv4(std::span<const uint8_t> f, sw::PacketDesc& d) {
    wire::EthView eth;
    if (!wire::parse_eth(f, eth) || eth.l2.ethertype != wire::ethertype::kIpv4) return false;
    if (f.size() < eth.l3_off + kIpv4MinHeader) return false;
    const uint8_t* ip = f.data() + eth.l3_off;
    const std::size_t ihl = static_cast<std::size_t>(ip[0] & 0x0F) * 4;
    if ((ip[0] >> 4) != 4 || ihl < kIpv4MinHeader || f.size() < eth.l3_off + ihl) return false;
    d.dscp = ip[1] >> 2;
    d.ecn = ip[1] & 3;
    d.ip_proto = ip[9];
    d.src_v4 = wire::load_be32(ip + 12);
    d.dst_v4 = wire::load_be32(ip + 16);
    if (d.ip_proto == wire::kIpProtoUdp && f.size() >= eth.l3_off + ihl + 4) {
        d.src_port = wire::load_be16(ip + ihl);
        d.dst_port = wire::load_be16(ip + ihl + 2);
    }
    return true;
}

// Where the IPv4 header of a frame describe_ipv4 accepted ends: the bytes a
// hop rewrites, and all the pool counts as written (not the payload, which
// a generator's receiver then need not read).
uint32_t ipv4_header_end(std::span<const uint8_t> f, const wire::EthView& eth) {
    return static_cast<uint32_t>(eth.l3_off + (f[eth.l3_off] & 0x0F) * 4u);
}

// A routed hop: new L2 addresses and one less TTL (ICRC does not cover TTL).
void rewrite_l3_hop(sim::FramePool& pool, sim::FrameHandle h, const std::array<uint8_t, 6>& dst,
                    const std::array<uint8_t, 6>& src) {
    wire::EthView eth;
    if (!wire::parse_eth(pool.headers(h), eth)) return;
    const std::span<uint8_t> f = pool.header(h, ipv4_header_end(pool.headers(h), eth));
    std::copy(dst.begin(), dst.end(), f.data());
    std::copy(src.begin(), src.end(), f.data() + 6);
    uint8_t* ip = f.data() + eth.l3_off;
    const std::size_t ihl = static_cast<std::size_t>(ip[0] & 0x0F) * 4;
    if (ip[8] > 0) --ip[8];
    ip[10] = ip[11] = 0;
    wire::store_be16(ip + 10, wire::ip_checksum(ip, ihl));
}

// ECN marking edits the IP header alone.
void mark_ce(sim::FramePool& pool, sim::FrameHandle h) {
    wire::EthView eth;
    if (!wire::parse_eth(pool.headers(h), eth)) return;
    wire::set_ip_ecn(pool.header(h, ipv4_header_end(pool.headers(h), eth)), wire::ecn::kCe);
}

}  // namespace

SwitchNode::SwitchNode(sim::Simulator& sim, const Topology& topo, uint32_t sw_index, uint64_t seed,
                       sw::Effects* scratch)
    : sim_(sim),
      own_fx_(scratch != nullptr ? nullptr : std::make_unique<sw::Effects>()),
      fx_(scratch != nullptr ? *scratch : *own_fx_),
      rng_(seed),
      port_(topo.switches[sw_index].cfg.ports.size()),
      tx_due_((port_.size() + 63) / 64, 0),
      port_mac_(topo.switches[sw_index].port_mac),
      sw_(topo.switches[sw_index].cfg),
      name_(topo.switches[sw_index].name) {
    topo.install_routes(sw_index, sw_.routes());
}

sim::NodeId SwitchNode::attach() {
    return sim_.add_node(*this);
}

void SwitchNode::on_frame(sim::PortId port, sim::FrameHandle h, Nanos now) {
    sim::FramePool& pool = sim_.pool();
    // What a switch reads of a frame is its headers and its length.
    const std::span<const uint8_t> f = pool.headers(h);
    fx_.clear();
    const wire::FrameKind kind = wire::classify(f);
    if (kind == wire::FrameKind::Pfc) {
        wire::Pfc pfc;
        if (wire::parse_pfc(pool.frame(h), pfc)) {
            sw::PfcFrameDesc d;
            d.class_enable = pfc.class_enable;
            d.quanta = pfc.quanta;
            sw_.on_pfc(port, d, now, fx_);
        } else {
            ++c_.bad_pfc_drops;
        }
        pool.free(h);
    } else {
        sw::PacketDesc d;
        if (!describe_ipv4(f, d)) {
            ++c_.not_ip_drops;
            pool.free(h);
        } else {
            d.handle = h.v;
            d.frame_len = Bytes{pool.len(h)};
            d.in_port = port;
            sw_.on_packet(d, now, rng_, fx_);
        }
    }
    apply(now);
}

void SwitchNode::on_timer(Nanos now) {
    // The node timer carries only the core's deadlines (ports have port
    // timers); one cached early finds nothing due and is armed again.
    if (sw_.next_timer() > now) {
        rearm();
        return;
    }
    // The core stops early when the buffer runs short; it says so by still
    // being due.
    do {
        fx_.clear();
        sw_.on_timer(now, fx_);
        apply(now);
    } while (sw_.next_timer() <= now);
}

void SwitchNode::on_port_timer(sim::PortId port, Nanos now) {
    if (port_[port].tx_at != now) return;  // served or moved earlier since it was armed
    tx_due_[port >> 6] |= uint64_t{1} << (port & 63);
    any_due_ = true;
    fx_.clear();
    apply(now);
}

void SwitchNode::send_pfc(sim::PortId port, const sw::PfcFrameDesc& d) {
    sim::FramePool& pool = sim_.pool();
    const sim::FrameHandle h = pool.alloc();
    if (!h.valid()) {
        ++c_.pool_empty_drops;
        return;
    }
    wire::Pfc pfc;
    pfc.src = wire::MacAddr{port_mac_[port]};
    pfc.class_enable = d.class_enable;
    pfc.quanta = d.quanta;
    pool.set_len(h, static_cast<uint32_t>(wire::encode_pfc(pfc, pool.buffer(h, wire::kPfcFrameLen))));
    ++c_.pfc_frames_sent;
    sim_.transmit_on(port_[port].link, h);
}

void SwitchNode::apply(Nanos now) {
    // Dequeues append to the same buffer, so it is walked by index until
    // no port is due any more.
    std::size_t i = 0;
    for (;;) {
        for (; i < fx_.size(); ++i) apply_one(fx_[i], now);
        if (!any_due_) break;
        any_due_ = false;
        bool dequeued = false;
        // Due ports in ascending order, the bitmap read live: a dequeue may
        // make ports after the one it served due, and they are served in
        // the same pass.
        for (std::size_t w = 0; w < tx_due_.size(); ++w) {
            for (uint64_t bits = tx_due_[w]; bits != 0;) {
                const std::size_t p = (w << 6) | static_cast<std::size_t>(std::countr_zero(bits));
                port_[p].tx_at = Nanos::max();
                tx_due_[w] &= ~(uint64_t{1} << (p & 63));
                dequeued = true;
                const auto tx = sw_.dequeue(static_cast<sw::PortId>(p), now, rng_, fx_);
                // Dequeue-stage CE marks land before the frame meets the wire
                // (and its capture tap).
                for (; i < fx_.size(); ++i) apply_one(fx_[i], now);
                if (tx) sim_.transmit_on(port_[p].link, sim::FrameHandle{tx->handle});
                // Two shifts: p & 63 may be 63.
                bits = tx_due_[w] & ((~uint64_t{0} << (p & 63)) << 1);
            }
        }
        if (!dequeued) break;
    }
    fx_.clear();
    rearm();
}

void SwitchNode::apply_one(const sw::Effect& e, Nanos now) {
    sim::FramePool& pool = sim_.pool();
    const sim::FrameHandle h{e.handle};
    switch (e.kind) {
        case sw::EffectKind::Enqueued: {
            const sw::Neighbor& nb = sw_.routes().neighbor(e.neighbor);
            rewrite_l3_hop(pool, h, nb.mac, port_mac_[e.port]);
            break;
        }
        case sw::EffectKind::MarkCe:
            mark_ce(pool, h);
            ++c_.ce_marked;
            break;
        case sw::EffectKind::Drop: pool.free(h); break;
        case sw::EffectKind::SendPfc:
            send_pfc(e.port, e.pfc);
            break;
        case sw::EffectKind::TxReady:
            if (e.at >= port_[e.port].tx_at) break;  // armed already, as early or earlier
            port_[e.port].tx_at = e.at;
            if (e.at <= now) {
                tx_due_[e.port >> 6] |= uint64_t{1} << (e.port & 63);
                any_due_ = true;
            } else {
                sim_.arm_port(node_id(), e.port, e.at);
            }
            break;
        case sw::EffectKind::WatchdogStorm:
        case sw::EffectKind::WatchdogRestore:
            events_.push_back(SwitchEvent{now, fmt::format("{}: {}", name_, sw_.describe(e))});
            break;
    }
}

void SwitchNode::rearm() {
    // The core caches its next deadline, so asking after every event is
    // cheap. The ports' times are port timers of their own.
    const Nanos t = sw_.next_timer();
    if (t == Nanos::max())
        sim_.cancel_timer(*this);
    else if (t != sim_.timer(*this))
        sim_.arm_timer(*this, t);
}

}  // namespace rocemu::fabric
