// libFuzzer target: a small sw::Switch (4-8 ports, PFC on priorities 3 and
// 4, ECN/WRED on their queues, an ECMP group, the PFC watchdog on) driven by
// a script of random frames on random ingress ports, dequeues, timers and
// time jumps. Frames are bytes, classified by the runtime's own
// sw::live::parse_frame: IPv4/IPv6 (RoCEv2 and not), 802.1Q tags with PCP,
// 802.1Qbb PFC frames (0x8808, opcode 0x0101) with random class vectors and
// quanta, 802.3x PAUSE, ARP and anything else, with input bytes overlaid.
// Invariants (abort on failure):
//   - parse_frame's IPv4 fast path agrees with parse_frame_general;
//   - describe_head (a switch log's line for a dropped frame) says something
//     of every frame's first 128 bytes, without reading past them;
//   - every packet handed in is, by the end of that call, either enqueued or
//     dropped, exactly once; a dequeue or a later drop names a queued packet
//     on the port and queue it was enqueued to;
//   - every Drop effect has a reason and is counted under it, at the port
//     the effect names (bad_port_drops for BadPort);
//   - once time has run far ahead and every port is drained, nothing is
//     queued and every buffer account (pool, queue, port, PG reserved,
//     shared and headroom) is back to zero.
// The switch of an input's config is reused from an earlier input with the
// same config bytes when there is one, after Switch::reset (switch_for).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/fuzz/common/fuzz_input.hpp"

#include "dataplane/wire/bytes.hpp"
#include "switch/dpdk/frame.hpp"
#include "switch/switch.hpp"

using namespace rocemu;
using namespace rocemu::sw;

namespace {

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_switch", what); }
using fuzz::Input;
// ROCEMU_FUZZ_TRACE=1: print each step, effect and frame sent, to read why an input fails.
const bool kTrace = std::getenv("ROCEMU_FUZZ_TRACE") != nullptr;

enum class St : uint8_t { Pending, Queued, Gone };
struct Pkt {
    St st = St::Pending;
    PortId port = 0;
    uint8_t queue = 0;
};

constexpr uint32_t host_ip(int port) { return (10u << 24) | (static_cast<uint32_t>(port) << 8) | 1u; }
constexpr uint32_t kEcmpNet = 0x0A090000;  // 10.9.0.0/16, spread over ports 1..3

// The switch an input's first two bytes configure, with its routes.
std::unique_ptr<Switch> make_switch(uint8_t c, uint8_t ar) {
    const size_t nports = 4 + (c & 3) * 4 / 3;  // 4..8
    SwitchConfig cfg = sonic_default_config(nports, BitsPerSec::gbps(c & 4 ? 100 : 25));
    // A small buffer so drops, XOFF and headroom all happen.
    cfg.pool_size = Bytes{(c & 8) ? 64 * 1024u : 256 * 1024u};
    cfg.pg_lossless.xoff = Bytes{(c & 16) ? 20000u : 50000u};  // small: the switch sizes its descriptors by the buffer
    cfg.wred_stage = (c & 32) ? WredStage::Dequeue : WredStage::Enqueue;
    cfg.pfc_wd.action = static_cast<WdAction>((c >> 6) % 3);
    cfg.pfc_wd.detection_time = Nanos::from_us(200);
    cfg.pfc_wd.restoration_time = Nanos::from_us(400);
    cfg.wred[3].green_min_threshold = Bytes{4000};
    cfg.wred[3].green_max_threshold = Bytes{40000};
    cfg.wred[3].green_drop_probability = 50;
    cfg.wred[1] = cfg.wred[3];
    cfg.wred[1].wred_green_enable = false;
    cfg.routing.adaptive[3] = static_cast<ArMode>(ar % 3);
    cfg.routing.adaptive[1] = static_cast<ArMode>((ar / 3) % 3);
    cfg.routing.flowlet_table_size = 64;
    if (ar & 0x80) cfg.routing.hash_fields |= kHashInPort;
    if (!validate(cfg).empty()) fail("the fuzzer's own config does not validate");
    auto sw = std::make_unique<Switch>(cfg);
    std::vector<uint32_t> nbs;
    for (size_t p = 0; p < nports; ++p)
        nbs.push_back(sw->routes().learn_host_v4(host_ip(static_cast<int>(p)), static_cast<PortId>(p),
                                                 {0x02, 0, 0, 0, 0, static_cast<uint8_t>(p)}));
    std::array<uint8_t, 16> v6{0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    nbs.push_back(sw->routes().learn_host_v6(v6, 2, {0x02, 0, 0, 0, 0, 0x62}));
    sw->routes().add_route_v4(kEcmpNet, 16, sw->routes().add_group({nbs[1], nbs[2], nbs[3]}));
    sw->routes().add_connected_v4(0x0A080000, 16);  // a connected subnet with no hosts: neighbor misses
    return sw;
}

// Switches made for recent inputs, most recent first, by their two config
// bytes. A new one costs most of a short input (its descriptor pool, about
// 20,000 slots for 8 ports, is allocated and paged in); libFuzzer runs
// several mutations of one input in a row, which mostly keep those bytes.
// A reused switch is reset(), which makes it a new one (unit test
// SwitchReset.BehavesAsANewSwitch), so an input does the same whether its
// switch is new or not; replaying a saved input makes a new one.
// ROCEMU_FUZZ_FRESH=1 makes a new switch for every input. Not instrumented
// for coverage: where an input's switch sits in the cache depends on the
// inputs before it, not on the input.
__attribute__((no_sanitize("coverage"))) Switch& switch_for(uint8_t c, uint8_t ar) {
    struct Made {
        uint16_t key = 0;
        std::unique_ptr<Switch> sw;
    };
    static std::array<Made, 8> made;
    static const bool fresh = std::getenv("ROCEMU_FUZZ_FRESH") != nullptr;
    const uint16_t key = static_cast<uint16_t>(c << 8 | ar);
    size_t i = 0;
    while (i + 1 < made.size() && !(made[i].sw && made[i].key == key)) ++i;
    if (fresh || !made[i].sw || made[i].key != key) made[i] = Made{key, make_switch(c, ar)};
    else made[i].sw->reset();
    for (; i > 0; --i) made[i].sw.swap(made[i - 1].sw), std::swap(made[i].key, made[i - 1].key);
    return *made[0].sw;
}

struct Harness {
    Switch* sw;
    Rng rng{7};
    Nanos now{0};
    std::vector<Pkt> pkts;  // index = handle
    std::vector<std::array<uint64_t, static_cast<size_t>(DropReason::kCount)>> drops_seen;
    uint64_t bad_port_seen = 0;
    std::vector<uint8_t> frame;

    explicit Harness(Input& in) {
        const uint8_t c = in.u8();
        const uint8_t ar = in.u8();
        if (kTrace) std::fprintf(stderr, "config byte %#x, routing byte %#x\n", c, ar);
        sw = &switch_for(c, ar);
        drops_seen.resize(nports());
        frame.reserve(9300);
    }

    size_t nports() const { return sw->num_ports(); }

    void effects(const Effects& fx) {
        for (const Effect& e : fx) {
            if (kTrace) std::fprintf(stderr, "  %lld ns: %s\n", static_cast<long long>(now.v), sw->describe(e).c_str());
            switch (e.kind) {
                case EffectKind::Enqueued: {
                    if (e.handle >= pkts.size() || pkts[e.handle].st != St::Pending)
                        fail("Enqueued names a packet that is not pending");
                    if (e.port >= nports() || e.queue >= kNumTc) fail("Enqueued to a port or queue that does not exist");
                    pkts[e.handle] = Pkt{St::Queued, e.port, e.queue};
                    break;
                }
                case EffectKind::Drop: {
                    if (e.handle >= pkts.size() || pkts[e.handle].st == St::Gone)
                        fail("Drop names a packet that is gone or was never handed in");
                    if (e.reason >= DropReason::kCount) fail("Drop without a valid reason");
                    pkts[e.handle].st = St::Gone;
                    if (e.reason == DropReason::BadPort)
                        ++bad_port_seen;
                    else if (e.port < nports())
                        ++drops_seen[e.port][static_cast<size_t>(e.reason)];
                    else
                        fail("Drop counted at a port that does not exist");
                    break;
                }
                case EffectKind::MarkCe:
                    if (e.handle >= pkts.size() || pkts[e.handle].st == St::Gone) fail("MarkCe on a packet that is gone");
                    break;
                case EffectKind::SendPfc:
                case EffectKind::TxReady:
                case EffectKind::WatchdogStorm:
                case EffectKind::WatchdogRestore:
                    if (e.port >= nports()) fail("effect names a port that does not exist");
                    break;
            }
        }
        if (sw->effects_overflow()) fail("effects overflowed");
    }

    void check_counters() const {
        // Arrays compared whole (one memcmp): reason by reason, under the
        // sanitizers, this check took a sixth of the run.
        for (size_t p = 0; p < nports(); ++p)
            if (sw->port_counters(static_cast<PortId>(p)).drops != drops_seen[p])
                fail("a port's drop counter disagrees with its Drop effects");
        if (sw->bad_port_drops() != bad_port_seen) fail("bad_port_drops disagrees with the BadPort Drop effects");
    }

    void tx(PortId port, const TxDesc& t) {
        if (kTrace)
            std::fprintf(stderr, "  tx port %u queue %u handle %u len %llu [%lld, %lld]\n", port, t.queue, t.handle,
                         static_cast<unsigned long long>(t.frame_len.v), static_cast<long long>(t.start.v),
                         static_cast<long long>(t.end.v));
        if (t.handle >= pkts.size()) fail("dequeued a handle never handed in");
        Pkt& k = pkts[t.handle];
        if (k.st != St::Queued || k.port != port || k.queue != t.queue)
            fail("dequeued a packet not queued on that port and queue");
        k.st = St::Gone;
        if (t.end < t.start) fail("a frame ends before it starts");
    }

    // Builds a frame from the input into `frame`.
    void build(Input& in) {
        const uint8_t kind = in.u8();
        const uint8_t dsel = in.u8();
        uint32_t dst;
        switch (dsel & 3) {
            case 0: dst = host_ip(dsel >> 2 & 7); break;
            case 1: dst = kEcmpNet | in.u16(); break;
            case 2: dst = 0x0A080000 | in.u8(); break;
            default: dst = in.u32(); break;
        }
        static constexpr uint8_t kDscps[] = {3, 4, 0, 8, 46, 48, 3, 4};
        const uint8_t tos = static_cast<uint8_t>(kDscps[dsel >> 5] << 2 | (kind >> 6));
        size_t len = 60 + in.u16() % 9300;
        if (kind & 0x20) len = 60 + in.u8();
        frame.assign(len, 0);
        uint8_t* f = frame.data();
        for (int i = 0; i < 6; ++i) f[i] = 0x02, f[6 + i] = 0x04;
        size_t l3 = 14;
        uint16_t et;
        switch (kind & 7) {
            case 0:
            case 1:
            case 2:
                et = 0x0800;
                break;
            case 3:  // 802.1Q with PCP, then IPv4 or IPv6
                wire::store_be16(f + 12, 0x8100);
                wire::store_be16(f + 14, static_cast<uint16_t>((kind >> 3 & 7) << 13 | 100));
                l3 = 18;
                et = kind & 0x10 ? 0x86DD : 0x0800;
                break;
            case 4:
                et = 0x86DD;
                break;
            case 5: {  // PFC (or, with bit 3, 802.3x PAUSE)
                et = 0x8808;
                wire::store_be16(f + 14, kind & 8 ? 0x0001 : 0x0101);
                wire::store_be16(f + 16, in.u8());
                for (int i = 0; i < 8; ++i) wire::store_be16(f + 18 + 2 * i, in.u16());
                break;
            }
            case 6:
                et = 0x0806;  // ARP: not routed
                break;
            default:
                et = in.u16();
                break;
        }
        if (l3 == 14) wire::store_be16(f + 12, et);
        else wire::store_be16(f + 16, et);
        if (et == 0x0800 && len >= l3 + 28) {
            uint8_t* ip = f + l3;
            ip[0] = 0x45;
            ip[1] = tos;
            wire::store_be16(ip + 2, static_cast<uint16_t>(len - l3));
            ip[8] = 64;
            ip[9] = kind & 0x10 ? 6 : 17;
            wire::store_be32(ip + 12, host_ip(kind >> 4 & 7));
            wire::store_be32(ip + 16, dst);
            wire::store_be16(ip + 20, in.u16());
            wire::store_be16(ip + 22, 4791);
        } else if (et == 0x86DD && len >= l3 + 48) {
            uint8_t* ip = f + l3;
            ip[0] = static_cast<uint8_t>(0x60 | tos >> 4);
            ip[1] = static_cast<uint8_t>(tos << 4);
            ip[6] = 17;
            ip[7] = 64;
            ip[8] = 0xFD;
            ip[23] = 2;
            ip[24] = 0xFD;
            ip[39] = dsel & 1;
            wire::store_be16(ip + 40, in.u16());
            wire::store_be16(ip + 42, 4791);
        }
        // Overlay a few input bytes anywhere, truncation included.
        const uint8_t edits = in.u8() % 4;
        for (uint8_t i = 0; i < edits; ++i) {
            const size_t at = in.u16() % (len + 1);
            if (at == len) frame.resize(in.u8() % (len + 1));
            else frame[at] = in.u8();
        }
    }

    // Classifies the frame as the runtime does and hands it to the core.
    void rx(PortId port, std::vector<PacketDesc>& batch) {
        PacketDesc d, g;
        PfcFrameDesc pfc, pg;
        const uint32_t h = static_cast<uint32_t>(pkts.size());
        const live::RxKind k = live::parse_frame(frame, port, h, d, pfc);
        const live::RxKind kg = live::parse_frame_general(frame, port, h, g, pg);
        if (kTrace)
            std::fprintf(stderr, " rx port %u: %zu bytes, kind %d, handle %u, dscp %u, dst %08x\n", port, frame.size(),
                         static_cast<int>(k), h, d.dscp, d.dst_v4);
        if (k != kg) fail("parse_frame and parse_frame_general classify differently");
        // What a switch log says of a dropped frame: its first bytes, as the runtime keeps them.
        if (k != live::RxKind::Pfc) {
            // A buffer of its own: ASan catches a read past the head.
            const std::vector<uint8_t> head(frame.begin(), frame.begin() + std::min<ptrdiff_t>(frame.size(), 128));
            if (live::describe_head(head, frame.size()).empty()) fail("describe_head said nothing");
        }
        if (k == live::RxKind::Data) {
            if (d.frame_len != g.frame_len || d.dscp != g.dscp || d.ecn != g.ecn || d.ip_proto != g.ip_proto ||
                d.ipv6 != g.ipv6 || d.src_port != g.src_port || d.dst_port != g.dst_port ||
                (!d.ipv6 && (d.src_v4 != g.src_v4 || d.dst_v4 != g.dst_v4)))
                fail("parse_frame's fast path and parse_frame_general disagree");
            pkts.push_back(Pkt{});
            batch.push_back(d);
        } else if (k == live::RxKind::Pfc) {
            if (pfc.class_enable != pg.class_enable || pfc.quanta != pg.quanta) fail("PFC parses differ");
            if (port < nports()) {
                Effects fx;
                sw->on_pfc(port, pfc, now, fx);
                effects(fx);
            }
        }
    }

    void submit(std::vector<PacketDesc>& batch) {
        if (batch.empty()) return;
        Effects fx;
        if (batch.size() == 1)
            sw->on_packet(batch[0], now, rng, fx);
        else
            sw->on_burst(batch.data(), batch.size(), now, rng, fx);
        effects(fx);
        for (const PacketDesc& d : batch)
            if (pkts[d.handle].st == St::Pending) fail("a packet handed in was neither enqueued nor dropped");
        batch.clear();
    }

    void dequeue(PortId port, bool burst) {
        Effects fx;
        if (burst) {
            TxDesc out[16];
            const size_t n = sw->dequeue_burst(port, now - Nanos{1000}, now, out, 16, rng, fx);
            effects(fx);
            for (size_t i = 0; i < n; ++i) tx(port, out[i]);
        } else {
            const std::optional<TxDesc> t = sw->dequeue(port, now, rng, fx);
            effects(fx);
            if (t) tx(port, *t);
        }
    }

    void timer() {
        Effects fx;
        sw->on_timer(now, fx);
        effects(fx);
    }

    size_t port_packets(PortId port) const {
        size_t n = 0;
        for (int q = 0; q < kNumTc; ++q) n += sw->queue_packets(port, q);
        return n;
    }

    // Runs time far ahead (pauses expire, the watchdog acts) and empties every port.
    void drain() {
        for (int round = 0; round < 64; ++round) {
            now += Nanos::from_ms(50);
            if (kTrace) std::fprintf(stderr, "drain round %d at %lld ns\n", round, static_cast<long long>(now.v));
            timer();
            bool any = false;
            bool queued = false;
            for (size_t p = 0; p < nports(); ++p) {
                const PortId port = static_cast<PortId>(p);
                // Until a call neither sends nor drops: a WRED drop at dequeue
                // sends nothing (n is 0) but re-arms the port at once, as a
                // runtime's loop would follow.
                for (size_t held = port_packets(port); held;) {
                    Effects fx;
                    TxDesc out[64];
                    const size_t n = sw->dequeue_burst(port, now - Nanos::from_ms(50), now, out, 64, rng, fx);
                    effects(fx);
                    for (size_t i = 0; i < n; ++i) tx(port, out[i]);
                    const size_t left = port_packets(port);
                    if (left == held) break;
                    held = left;
                    any = true;
                }
                queued |= port_packets(port) != 0;
            }
            if (!any && !queued) break;
        }
        for (std::size_t i = 0; i < pkts.size(); ++i)
            if (pkts[i].st != St::Gone) {
                if (kTrace)
                    std::fprintf(stderr, "handle %zu still queued on port %u queue %u; the switch holds %zu there\n", i,
                                 pkts[i].port, pkts[i].queue, sw->queue_packets(pkts[i].port, pkts[i].queue));
                fail("a packet is still queued after the drain");
            }
        const Mmu& m = sw->mmu();
        if (m.pool_used().v != 0) fail("shared pool occupancy not back to zero");
        for (size_t p = 0; p < nports(); ++p) {
            const PortId port = static_cast<PortId>(p);
            if (m.port_bytes(port).v != 0) fail("port occupancy not back to zero");
            for (int i = 0; i < kNumTc; ++i) {
                if (m.queue_bytes(port, i).v != 0 || sw->queue_packets(port, i) != 0)
                    fail("queue occupancy not back to zero");
                if (m.pg_reserved(port, i).v != 0 || m.pg_shared(port, i).v != 0 || m.pg_headroom(port, i).v != 0)
                    fail("PG occupancy not back to zero");
            }
        }
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in{data, size};
    Harness h(in);
    std::vector<PacketDesc> batch;
    for (int steps = 0; !in.empty() && steps < 512; ++steps) {
        const uint8_t op = in.u8();
        const PortId port = static_cast<PortId>((op >> 3) % (h.nports() + 1));  // nports: a bad port
        if (kTrace) std::fprintf(stderr, "step %d: op %u port %u at %lld ns\n", steps, op & 7, port, static_cast<long long>(h.now.v));
        switch (op & 7) {
            case 0:
            case 1:
            case 2:  // one frame
                h.build(in);
                h.rx(port, batch);
                h.submit(batch);
                break;
            case 3: {  // a burst of frames on one port
                const uint8_t n = 1 + in.u8() % 24;
                for (uint8_t i = 0; i < n && !in.empty(); ++i) {
                    h.build(in);
                    h.rx(port, batch);
                }
                h.submit(batch);
                break;
            }
            case 4:
                h.dequeue(port, false);
                break;
            case 5:
                h.dequeue(port, true);
                break;
            case 6: {  // to the next timer, or a little
                const Nanos t = h.sw->next_timer();
                if (op & 0x80 && t != Nanos::max() && t > h.now) h.now = t;
                else h.now += Nanos{static_cast<int64_t>(in.u16()) * 10};
                h.timer();
                break;
            }
            default:  // a jump: watchdog detection and restoration, pause expiry
                h.now += Nanos::from_us(in.u8() * 8);
                h.timer();
                break;
        }
        h.check_counters();
    }
    h.drain();
    h.check_counters();
    return 0;
}
