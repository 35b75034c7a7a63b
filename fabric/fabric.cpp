#include "fabric/fabric.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace rocemu::fabric {

namespace {

// Per-node RNG streams derived from the run seed and the node's index.
uint64_t node_seed(uint64_t seed, uint64_t index) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// sim's link config is moving to the shared link::Config (speed,
// propagation_delay, wire_overhead); both spellings compile until that has
// landed. The switch core and the NICs already pace every frame with its
// preamble and IFG, so the link must not add them again.
template <typename Config>
Config make_link_config(const LinkClass& c) {
    Config l;
    if constexpr (requires { l.propagation_delay; }) {
        l.speed = c.speed;
        l.propagation_delay = c.delay;
        l.wire_overhead = Bytes{0};
    } else {
        l.rate = c.speed;
        l.propagation = c.delay;
    }
    return l;
}

}  // namespace

sim::LinkConfig link_config(const LinkClass& c) { return make_link_config<sim::LinkConfig>(c); }

Fabric::Fabric(const Topology& topo, uint64_t seed)
    : build_(std::in_place, heap_), topo_(topo), sim_(sim::SimConfig{seed, 1u << 18}) {
    data_queue_ = topo_.data_queue();
    std::vector<sim::NodeId> sw_ids, nic_ids;
    for (uint32_t s = 0; s < topo_.switches.size(); ++s) {
        switches_.push_back(std::make_unique<SwitchNode>(sim_, topo_, s, node_seed(seed, s), &switch_fx_));
        sw_ids.push_back(switches_.back()->attach());
    }
    for (uint32_t n = 0; n < topo_.nics.size(); ++n) {
        if (model() == NicModel::Rc) {
            rc_nics_.push_back(std::make_unique<EngineNic>(sim_, topo_, n));
            rc_nics_.back()->set_flow_sink(&stats_, this);
            nic_ids.push_back(rc_nics_.back()->attach());
        } else {
            nics_.push_back(std::make_unique<GenNic>(sim_, topo_, n, stats_, done_));
            nic_ids.push_back(nics_.back()->attach());
        }
    }
    for (const LinkSpec& l : topo_.links) {
        auto id = [&](const Endpoint& e) { return e.is_switch ? sw_ids[e.index] : nic_ids[e.index]; };
        const auto [ab, ba] = sim_.connect(id(l.a), l.a.port, id(l.b), l.b.port, link_config(l.cls));
        links_.push_back({ab, ba});
    }
    build_.reset();
}

uint32_t Fabric::add_flow(const FlowSpec& f) {
    if (f.src >= nic_count() || f.dst >= nic_count() || f.src == f.dst)
        throw std::invalid_argument(fmt::format("flow {} -> {}: the fabric has NICs 0 to {}, and a flow needs two of them",
                                                f.src, f.dst, nic_count() - 1));
    // A flow's QPN is kFlowQpnBase + its id, in BTH's 24 bits.
    if (flows_.size() >= (1u << 24) - kFlowQpnBase)
        throw std::invalid_argument(fmt::format("flow {} -> {}: a fabric runs at most {} flows (QPNs are 24 bits)", f.src,
                                                f.dst, (1u << 24) - kFlowQpnBase));
    const HeapSegment::Use use(heap_);
    const auto id = static_cast<uint32_t>(flows_.size());
    flows_.push_back(f);
    stats_.emplace_back();
    if (model() == NicModel::Generator) {
        nics_[f.src]->add_tx_flow(id, f, topo_.nics[f.dst]);
        nics_[f.dst]->add_rx_flow(id, f);
        return id;
    }
    EngineNic& src = *rc_nics_[f.src];
    EngineNic& dst = *rc_nics_[f.dst];
    const Qpn sq = src.create_qp(EngineNic::QpEnd::Sender);
    const Qpn dq = dst.create_qp(f.reports_arrival() ? EngineNic::QpEnd::StepReceiver : EngineNic::QpEnd::Receiver);
    // Both ends start at PSN 0: nothing on the wire depends on the choice.
    // The flow's source port is its ECMP entropy, the ACKs' too.
    src.connect(sq, dq, topo_.nics[f.dst], Psn{0}, Psn{0}, f.sport);
    dst.connect(dq, sq, topo_.nics[f.src], Psn{0}, Psn{0}, f.sport);
    // Payload is never checked here: sources are null MRs (zeros nobody
    // reads), sinks discard MRs (checked, acknowledged, placed nowhere).
    const EngineNic::Region from = src.null_region(EngineNic::kChunk);
    const EngineNic::Region to = dst.discard_region(EngineNic::kChunk);
    // A gated flow never opens by time: open_waiters opens it.
    FlowSpec spec = f;
    if (f.gated()) spec.start = Nanos::max();
    src.add_tx_flow(id, spec, sq, from, to.va, to.rkey);
    dst.add_rx_flow(id, f, dq);
    rx_qps_.emplace_back(f.dst, dq);
    steps_done_.push_back(0);
    steps_arrived_.push_back(0);
    arrived_at_.push_back(Nanos{});
    steps_begun_.push_back(f.gated() ? 0 : 1);  // else step 0 opens at the flow's start
    return id;
}

void Fabric::stall(uint32_t nic, Nanos at) {
    const HeapSegment::Use use(heap_);
    if (nic >= nic_count())
        throw std::invalid_argument(fmt::format("stall: no NIC {} (the fabric has {})", nic, nic_count()));
    if (model() == NicModel::Rc)
        rc_nics_[nic]->stall_from(at);
    else
        nics_[nic]->stall_from(at);
}

bool Fabric::nic_paused(uint32_t nic, Nanos now) const {
    return model() == NicModel::Rc ? rc_nics_[nic]->paused(now) : nics_[nic]->paused(now);
}

void Fabric::on_step_done(uint32_t flow, Nanos now) {
    const uint32_t done = ++steps_done_[flow];
    if (done == std::max(flows_[flow].steps, 1u)) {
        stats_[flow].done = true;
        ++done_;
    }
    maybe_begin(flow, now);
    for (const uint32_t g : followers_[flow]) maybe_begin(g, now);
    if (stats_[flow].done && !flows_[flow].reports_arrival()) open_waiters(flow, now);
}

bool Fabric::arrived_whole(uint32_t flow) const {
    const FlowSpec& f = flows_[flow];
    return f.reports_arrival() ? steps_arrived_[flow] >= std::max(f.steps, 1u) : stats_[flow].done;
}

void Fabric::open_waiters(uint32_t flow, Nanos now) {
    for (const uint32_t g : waiters_[flow]) {
        const FlowSpec& w = flows_[g];
        if (steps_begun_[g] != 0 || !arrived_whole(w.gate)) continue;
        if (w.behind != FlowSpec::kNoFlow && steps_begun_[w.behind] < std::max(flows_[w.behind].steps, 1u)) continue;
        steps_begun_[g] = 1;
        rc_nics_[w.src]->begin_step(g, now);
        if (steps_begun_[g] < std::max(w.steps, 1u))
            maybe_begin(g, now);
        else
            open_waiters(g, now);  // the flows behind it
    }
}

void Fabric::on_step_arrived(uint32_t flow, Nanos now) {
    ++steps_arrived_[flow];
    for (const uint32_t g : followers_[flow]) maybe_begin(g, now);
    if (!arrived_whole(flow)) return;
    arrived_at_[flow] = now;
    open_waiters(flow, now);
}

void Fabric::maybe_begin(uint32_t flow, Nanos now) {
    const FlowSpec& f = flows_[flow];
    // Step 0 opens at the flow's start or, if gated, in open_waiters. Step
    // k forwards what flow `after`'s step k-1 brought, so it opens once that
    // has arrived here, whatever its own earlier steps' ACKs; without an
    // `after`, once its own step k-1 has completed.
    const auto ready = [&](uint32_t next) {
        if (f.after == FlowSpec::kNoFlow) return steps_done_[flow] >= next;
        const uint32_t came = flows_[f.after].reports_arrival() ? steps_arrived_[f.after] : steps_done_[f.after];
        return came >= next;
    };
    bool opened = false;
    for (uint32_t next; (next = steps_begun_[flow]) != 0 && next < std::max(f.steps, 1u) && ready(next);) {
        ++steps_begun_[flow];
        rc_nics_[f.src]->begin_step(flow, now);
        opened = true;
    }
    if (opened && steps_begun_[flow] == std::max(f.steps, 1u)) open_waiters(flow, now);
}

bool Fabric::capture(std::string_view link, const std::string& path, std::string& error) {
    const HeapSegment::Use use(heap_);
    const auto idx = topo_.find_link(link);
    if (!idx) {
        error = topo_.pcap_link_error(link);
        return false;
    }
    auto w = std::make_unique<pcap::Writer>(path);
    if (!w->ok()) {
        error = fmt::format("--pcap: cannot write {}: {}", path, w->error());
        return false;
    }
    // Frames are captured as they enter the wire, in both directions.
    sim_.set_taps(links_[*idx][0], w.get(), nullptr);
    sim_.set_taps(links_[*idx][1], w.get(), nullptr);
    writers_.push_back(std::move(w));
    return true;
}

void Fabric::start() {
    const HeapSegment::Use use(heap_);
    for (auto& n : nics_) n->start();
    followers_.assign(flows_.size(), {});
    for (uint32_t id = 0; id < flows_.size(); ++id) {
        const uint32_t after = flows_[id].after;
        if (after == FlowSpec::kNoFlow) continue;
        if (after >= flows_.size() || after == id)
            throw std::invalid_argument(fmt::format("flow {}: after = {} names no other flow", id, after));
        followers_[after].push_back(id);
    }
    waiters_.assign(flows_.size(), {});
    for (uint32_t id = 0; id < flows_.size(); ++id) {
        if (const std::string why = gate_problem(flows_, id); !why.empty()) throw std::invalid_argument(why);
        for (const uint32_t w : {flows_[id].gate, flows_[id].behind})
            if (w != FlowSpec::kNoFlow) waiters_[w].push_back(id);
    }
    // RC flows open their first step at their start time.
    for (auto& n : rc_nics_) n->begin_flows();
}

bool Fabric::all_done() const { return done_ == flows_.size(); }

Nanos Fabric::run(Nanos limit, Nanos every, const std::function<void(Nanos)>& sample,
                  const std::function<bool(Nanos)>& tick) {
    const bool sampling = every > Nanos{0} && sample;
    Nanos next_sample = sampling ? sim_.now() + every : Nanos::max();
    const bool has_flows = !flows_.empty();
    const bool ticking = static_cast<bool>(tick);
    uint32_t events = 0;
    // Checked after every event: the tick rides on it.
    bool stopped = false;
    const auto finished = [&] {
        if (ticking && ++events % kTickEvents == 0 && tick(sim_.now())) stopped = true;
        return stopped || (has_flows && all_done());
    };
    for (;;) {
        const Nanos stop_at = std::min(limit, next_sample);
        if (sim_.run_until_cond(finished, stop_at)) break;
        sim_.run_until(stop_at);
        if (has_flows && all_done()) break;
        if (stop_at == next_sample) {
            sync_receiver_stats();
            sample(stop_at);
            next_sample += every;
        }
        if (stop_at >= limit) break;
    }
    for (auto& w : writers_)
        if (!w->flush() && capture_error_.empty()) capture_error_ = w->error();
    sync_receiver_stats();
    return sim_.now();
}

void Fabric::sync_receiver_stats() {
    for (std::size_t i = 0; i < rx_qps_.size(); ++i) {
        const auto [nic, qp] = rx_qps_[i];
        const transport::Counters* c = rc_nics_[nic]->engine().qp_counters(qp);
        if (!c) continue;
        FlowStats& s = stats_[i];
        s.rx_bytes = c->rcvd_bytes;
        s.rx_pkts = c->rcvd_pkts;
        s.rx_out_of_order = c->out_of_seq_request;
        s.ce_rx = c->np_ecn_marked_roce_packets;
        s.cnp_tx = c->np_cnp_sent;
    }
}

template <typename F>
void Fabric::for_each_drop(F&& f) const {
    for (const auto& s : switches_) {
        const sw::Switch& core = s->core();
        for (std::size_t p = 0; p < core.num_ports(); ++p) {
            const sw::PortCounters& pc = core.port_counters(static_cast<sw::PortId>(p));
            for (std::size_t r = 0; r < pc.drops.size(); ++r)
                f("switch", sw::drop_reason_name(static_cast<sw::DropReason>(r)), pc.drops[r], false);
        }
        f("switch", "not_ip", s->counters().not_ip_drops, false);
        f("switch", "bad_pfc", s->counters().bad_pfc_drops, false);
        f("switch", "pool_empty", s->counters().pool_empty_drops, false);
    }
    for (const auto& n : rc_nics_) {
        const transport::Counters& e = n->engine().counters();
        for (std::size_t r = 0; r < e.drops.size(); ++r) {
            const auto why = static_cast<transport::DropReason>(r);
            f("nic", transport::to_string(why), e.drops[r], transport::is_ignored_response(why));
        }
        f("nic", "pool_empty", n->counters().pool_empty_drops, false);
        f("nic", "stalled", n->counters().stalled_drops, false);
    }
    for (const auto& n : nics_) {
        const NicCounters& c = n->counters();
        f("nic", "bad_frame", c.bad_frame_drops, false);
        f("nic", "unknown_qp", c.unknown_qp_drops, false);
        f("nic", "stalled", c.stalled_drops, false);
        f("nic", "pool_empty", c.pool_empty_drops, false);
        f("nic", "cnp_queue", c.cnp_queue_drops, false);
    }
}

Totals Fabric::totals() const {
    Totals t;
    const Nanos now = sim_.now();
    for (const auto& s : switches_) {
        const sw::Switch& core = s->core();
        t.pfc_frames += s->counters().pfc_frames_sent;
        t.ecn_marks += s->counters().ce_marked;
        for (std::size_t p = 0; p < core.num_ports(); ++p) {
            const sw::PortCounters& pc = core.port_counters(static_cast<sw::PortId>(p));
            t.watchdog_drops += pc.drops[static_cast<std::size_t>(sw::DropReason::PfcWatchdog)];
            for (const uint64_t x : pc.pfc_tx_xoff) t.pfc_xoff += x;
            for (int q = 0; q < sw::kNumTc; ++q)
                t.max_queue = std::max(t.max_queue, core.queue_counters(static_cast<sw::PortId>(p), q).watermark);
        }
    }
    for (const auto& n : rc_nics_) {
        const transport::Counters& e = n->engine().counters();
        t.cnps += e.np_cnp_sent;
        t.pfc_frames += n->counters().pfc_tx;
        t.nic_paused += n->paused_time(now);
    }
    for (const auto& n : nics_) {
        const NicCounters& c = n->counters();
        t.pfc_frames += c.pfc_tx;
        t.cnps += c.cnp_tx;
        t.nic_paused += n->paused_time(now);
    }
    for (std::size_t i = 0; i < topo_.links.size(); ++i) {
        for (int d = 0; d < 2; ++d) {
            const sim::LinkCounters& lc = sim_.link(links_[i][d]).counters();
            t.frames_delivered += lc.delivered_frames;
            if (topo_.links[i].fabric) t.fabric_link_bytes += lc.tx_bytes;
        }
    }
    for_each_drop([&](std::string_view side, std::string_view, uint64_t n, bool ignored) {
        (ignored ? t.ignored_responses : side == "switch" ? t.switch_drops : t.nic_drops) += n;
    });
    t.sim_events = sim_.counters().events;
    return t;
}

std::vector<DropCount> Fabric::drop_reasons(bool ignored) const {
    std::vector<DropCount> out;
    for_each_drop([&](std::string_view side, std::string_view cause, uint64_t n, bool is_ignored) {
        if (n == 0 || is_ignored != ignored) return;
        const std::string name = fmt::format("{} {}", side, cause);
        for (DropCount& d : out)
            if (d.cause == name) {
                d.count += n;
                return;
            }
        out.push_back({name, n});
    });
    return out;
}

std::vector<SwitchEvent> Fabric::events() const {
    std::vector<SwitchEvent> all;
    for (const auto& s : switches_) all.insert(all.end(), s->events().begin(), s->events().end());
    std::stable_sort(all.begin(), all.end(), [](const SwitchEvent& a, const SwitchEvent& b) { return a.at < b.at; });
    return all;
}

}  // namespace rocemu::fabric
