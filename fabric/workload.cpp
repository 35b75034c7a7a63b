#include "fabric/workload.hpp"

#include <charconv>
#include <numeric>
#include <unordered_set>

#include <fmt/format.h>

namespace rocemu::fabric {

std::string_view pattern_name(Pattern p) {
    switch (p) {
        case Pattern::Incast: return "incast";
        case Pattern::Permutation: return "permutation";
        case Pattern::AllToAll: return "all_to_all";
        case Pattern::RingAllReduce: return "ring_allreduce";
        case Pattern::HdAllReduce: return "hd_allreduce";
    }
    return "?";
}

std::optional<Pattern> parse_pattern(std::string_view name) {
    for (const Pattern p :
         {Pattern::Incast, Pattern::Permutation, Pattern::AllToAll, Pattern::RingAllReduce, Pattern::HdAllReduce})
        if (pattern_name(p) == name) return p;
    return std::nullopt;
}

std::optional<Bytes> parse_size(std::string_view s) {
    uint64_t unit = 1;
    if (!s.empty()) {
        switch (s.back()) {
            case 'K':
            case 'k': unit = uint64_t{1} << 10; break;
            case 'M':
            case 'm': unit = uint64_t{1} << 20; break;
            case 'G':
            case 'g': unit = uint64_t{1} << 30; break;
            default: break;
        }
        if (unit > 1) s.remove_suffix(1);
    }
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    if (v == 0 || v > kMaxSize.v / unit) return std::nullopt;
    return Bytes{v * unit};
}

std::vector<Bytes> size_range(Bytes min, Bytes max, uint64_t factor, Bytes step, std::string& error) {
    std::vector<Bytes> out;
    if (min.v > max.v) {
        error = fmt::format("the smallest size ({} B) is larger than the largest ({} B)", min.v, max.v);
        return out;
    }
    if (min.v == 0) {
        error = "sizes start at 1 B";
        return out;
    }
    if (factor <= 1 && step.v == 0) {
        error = "a step of 0 B never reaches the largest size";
        return out;
    }
    for (uint64_t v = min.v;;) {
        if (out.size() == kMaxSweepSizes) {
            error = fmt::format("the sweep from {} to {} B has more than {} sizes: take a larger step or factor",
                                min.v, max.v, kMaxSweepSizes);
            return {};
        }
        out.push_back(Bytes{v});
        // The next size, unless it would pass max (tested without overflow).
        if (factor > 1 ? v > max.v / factor : step.v > max.v - v) return out;
        v = factor > 1 ? v * factor : v + step.v;
    }
}

double busbw_factor(Pattern p, uint32_t n) {
    if (n < 2) return 1.0;
    switch (p) {
        case Pattern::RingAllReduce:
        case Pattern::HdAllReduce: return 2.0 * (n - 1) / n;
        case Pattern::AllToAll: return static_cast<double>(n - 1) / n;
        case Pattern::Incast:
        case Pattern::Permutation: return 1.0;
    }
    return 1.0;
}

namespace {

// One ring or halving-doubling per rail: NICs per host on a rail-optimised
// fabric, else 1.
uint32_t collective_rails(const Topology& topo) {
    return topo.cfg.shape == Shape::Rail ? topo.cfg.nics_per_host : 1;
}

}  // namespace

uint32_t collective_ranks(const Topology& topo) { return topo.nic_count() / collective_rails(topo); }

std::string workload_problem(const Topology& topo, Pattern p, Bytes size) {
    const uint32_t n = topo.nic_count();
    switch (p) {
        case Pattern::Incast:
        case Pattern::Permutation:
            if (n < 2) return fmt::format("{} needs at least 2 NICs; the fabric has {}", pattern_name(p), n);
            return {};
        case Pattern::AllToAll:
            if (n < 2) return fmt::format("all_to_all needs at least 2 NICs; the fabric has {}", n);
            if (size.v < n)
                return fmt::format("all_to_all splits each NIC's {} B over its {} NICs; sizes start at {} B", size.v,
                                   n, n);
            return {};
        case Pattern::RingAllReduce:
        case Pattern::HdAllReduce: {
            const uint32_t ranks = collective_ranks(topo);
            if (ranks < 2) return fmt::format("{} needs at least 2 ranks; the fabric has {}", pattern_name(p), ranks);
            if (p == Pattern::HdAllReduce && (ranks & (ranks - 1)))
                return fmt::format("hd_allreduce needs a power-of-two number of ranks; the fabric has {} (use "
                                   "ring_allreduce)",
                                   ranks);
            if (size.v < ranks)
                return fmt::format("{} splits {} B over {} ranks; sizes start at {} B", pattern_name(p), size.v, ranks,
                                   ranks);
            return {};
        }
    }
    return {};
}

std::vector<FlowSpec> make_flows(const Topology& topo, const Workload& w, Rng& rng) {
    const auto n = topo.nic_count();
    std::vector<FlowSpec> out;
    // A flow is a QP pair named by (source, destination, UDP source port):
    // two flows between the same NICs (halving-doubling's two phases) get
    // different ports.
    std::unordered_set<uint64_t> keys;
    auto add = [&](uint32_t src, uint32_t dst, uint64_t bytes) {
        if (bytes == 0 || src == dst) return;
        uint16_t sport;
        do {
            sport = static_cast<uint16_t>(0xC000 | rng.below(0x4000));
        } while (!keys.insert(uint64_t{src} << 32 | uint64_t{dst} << 16 | sport).second);
        out.push_back(FlowSpec{src, dst, Bytes{bytes}, w.start, sport});
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
            if (!workload_problem(topo, w.pattern, w.size).empty()) break;
            const uint32_t rails = collective_rails(topo);
            const uint32_t ranks = collective_ranks(topo);
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
        case Pattern::HdAllReduce: {
            if (!workload_problem(topo, w.pattern, w.size).empty()) break;
            const uint32_t rails = collective_rails(topo);
            const uint32_t ranks = collective_ranks(topo);
            uint32_t log = 0;
            while ((1u << log) < ranks) ++log;
            // Stage s: distance and bytes; stage s-1's flows of every rank
            // and rail start at prev[h * rails + i].
            std::vector<uint32_t> prev, cur(n);
            uint32_t prev_k = 0;
            for (uint32_t s = 0; s < 2 * log; ++s) {
                const uint32_t k = s < log ? s : 2 * log - 1 - s;  // distance 2^k
                const uint64_t bytes = w.size.v >> (k + 1);
                for (uint32_t h = 0; h < ranks; ++h)
                    for (uint32_t i = 0; i < rails; ++i) {
                        const uint32_t me = h * rails + i;
                        add(me, (h ^ (1u << k)) * rails + i, bytes);
                        cur[me] = static_cast<uint32_t>(out.size() - 1);
                        out.back().notify = true;
                        if (s > 0) {
                            out.back().gate = prev[(h ^ (1u << prev_k)) * rails + i];
                            out.back().behind = prev[me];
                        }
                    }
                prev = cur;
                prev_k = k;
            }
            break;
        }
    }
    return out;
}

}  // namespace rocemu::fabric
