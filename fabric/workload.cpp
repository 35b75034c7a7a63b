#include "fabric/workload.hpp"

#include <numeric>

namespace rocemu::fabric {

std::string_view pattern_name(Pattern p) {
    switch (p) {
        case Pattern::Incast: return "incast";
        case Pattern::Permutation: return "permutation";
        case Pattern::AllToAll: return "all_to_all";
        case Pattern::RingAllReduce: return "ring_allreduce";
    }
    return "?";
}

std::optional<Pattern> parse_pattern(std::string_view name) {
    for (const Pattern p : {Pattern::Incast, Pattern::Permutation, Pattern::AllToAll, Pattern::RingAllReduce})
        if (pattern_name(p) == name) return p;
    return std::nullopt;
}

double busbw_factor(Pattern p, uint32_t n) {
    if (n < 2) return 1.0;
    switch (p) {
        case Pattern::RingAllReduce: return 2.0 * (n - 1) / n;
        case Pattern::AllToAll: return static_cast<double>(n - 1) / n;
        case Pattern::Incast:
        case Pattern::Permutation: return 1.0;
    }
    return 1.0;
}

std::vector<FlowSpec> make_flows(const Topology& topo, const Workload& w, Rng& rng) {
    const auto n = topo.nic_count();
    std::vector<FlowSpec> out;
    auto add = [&](uint32_t src, uint32_t dst, uint64_t bytes) {
        if (bytes == 0 || src == dst) return;
        out.push_back(FlowSpec{src, dst, Bytes{bytes}, w.start, static_cast<uint16_t>(0xC000 | rng.below(0x4000))});
    };
    switch (w.pattern) {
        case Pattern::Incast: {
            uint32_t added = 0;
            for (uint32_t s = 0; s < n; ++s) {
                if (s == w.incast_target) continue;
                if (w.incast_senders && added == w.incast_senders) break;
                add(s, w.incast_target, w.size.v);
                ++added;
            }
            break;
        }
        case Pattern::Permutation: {
            // A random derangement: everyone sends, everyone receives, nobody
            // to itself.
            std::vector<uint32_t> perm(n);
            std::iota(perm.begin(), perm.end(), 0u);
            for (bool ok = false; !ok && n > 1;) {
                for (uint32_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
                ok = true;
                for (uint32_t i = 0; i < n; ++i) ok &= perm[i] != i;
            }
            for (uint32_t i = 0; i < n; ++i) add(i, perm[i], w.size.v);
            break;
        }
        case Pattern::AllToAll:
            for (uint32_t i = 0; i < n; ++i)
                for (uint32_t j = 0; j < n; ++j) add(i, j, w.size.v / n);
            break;
        case Pattern::RingAllReduce: {
            const uint32_t rails = topo.cfg.shape == Shape::Rail ? topo.cfg.nics_per_host : 1;
            const uint32_t ranks = n / rails;
            if (ranks < 2 || w.size.v < ranks) break;
            // 2(n-1) steps (reduce-scatter, then all-gather), each a chunk of
            // size/n to the ring successor once the predecessor's previous
            // step has landed here.
            const uint32_t steps = 2 * (ranks - 1);
            const uint64_t bytes = w.size.v / ranks * steps;
            // NICs are numbered host-major, so NIC i of host h is h*rails+i,
            // and flows are added in that order.
            const auto first = static_cast<uint32_t>(out.size());
            for (uint32_t h = 0; h < ranks; ++h)
                for (uint32_t i = 0; i < rails; ++i) {
                    add(h * rails + i, ((h + 1) % ranks) * rails + i, bytes);
                    out.back().steps = steps;
                    out.back().after = first + ((h + ranks - 1) % ranks) * rails + i;
                }
            break;
        }
    }
    return out;
}

}  // namespace rocemu::fabric
