// IPv4 neighbour cache: resolved entries with a lifetime, incomplete entries
// that are probed on a timer, and a bounded queue of waiters (QPs or pings
// that asked for an address) released when the reply comes or the probes run
// out. Time comes in as `now`; the cache never sends anything itself: the
// caller's callbacks turn probes and outcomes into frames and effects.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "common/fixed_vec.hpp"
#include "common/units.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::host {

struct ArpConfig {
    Nanos reachable_time = Nanos::from_s(60);   // lifetime of a learned entry
    Nanos retransmit_time = Nanos::from_s(1);   // between ARP requests while incomplete
    uint32_t max_probes = 3;                    // requests before a resolution fails
};

class ArpCache {
public:
    static constexpr size_t kEntries = 256;
    static constexpr size_t kWaiters = 64;

    enum class Status : uint8_t { Hit, Pending, Full };
    struct Lookup {
        Status status = Status::Full;
        wire::MacAddr mac;            // when Hit
        bool send_request = false;    // a new resolution started: send the first request now
    };
    struct Counters {
        uint64_t resolved = 0, failed = 0, evicted = 0, waiters_full = 0, entries_full = 0;
    };

    explicit ArpCache(const ArpConfig& cfg = {}) : cfg_(cfg) {}

    // A live entry's MAC, without starting a resolution.
    std::optional<wire::MacAddr> lookup(uint32_t ip, Nanos now) const;

    // Hit, or starts/joins a resolution and queues `cookie` as a waiter.
    // Full when no entry or waiter slot is free (nothing is queued then).
    Lookup resolve(uint32_t ip, Nanos now, uint64_t cookie);

    // Records ip -> mac. An existing entry is always refreshed; a new one is
    // created only when `create` (RFC 826: the packet was addressed to us).
    // Each waiter on `ip` is handed to on_resolved(cookie, mac) and dropped.
    template <typename OnResolved>
    void learn(uint32_t ip, const wire::MacAddr& mac, Nanos now, bool create, OnResolved&& on_resolved);

    // Expires entries and probes incomplete ones: on_probe(ip) for each request
    // due, on_failed(ip, cookie) for each waiter whose resolution gave up.
    template <typename OnProbe, typename OnFailed>
    void on_timer(Nanos now, OnProbe&& on_probe, OnFailed&& on_failed);

    // Earliest time on_timer() has work, or Nanos::max().
    Nanos next_timer() const;

    size_t size() const;
    size_t waiters() const { return waiters_.size(); }
    const Counters& counters() const { return counters_; }

private:
    enum class State : uint8_t { Free, Incomplete, Reachable };
    struct Entry {
        State state = State::Free;
        uint32_t ip = 0;
        wire::MacAddr mac;
        Nanos deadline;       // Reachable: expiry; Incomplete: next probe
        uint32_t probes = 0;  // requests sent while incomplete
    };
    struct Waiter {
        uint32_t ip = 0;
        uint64_t cookie = 0;
    };

    Entry* find(uint32_t ip);
    const Entry* find(uint32_t ip) const;
    Entry* allocate();
    template <typename F>
    void release_waiters(uint32_t ip, F&& f);

    ArpConfig cfg_;
    std::array<Entry, kEntries> entries_{};
    FixedVec<Waiter, kWaiters> waiters_;
    Counters counters_;
};

template <typename F>
void ArpCache::release_waiters(uint32_t ip, F&& f) {
    // Iterate a copy: a callback may queue a new waiter.
    const FixedVec<Waiter, kWaiters> all = waiters_;
    waiters_.clear();
    for (const Waiter& w : all) {
        if (w.ip == ip) f(w.cookie);
        else waiters_.push_back(w);
    }
}

template <typename OnResolved>
void ArpCache::learn(uint32_t ip, const wire::MacAddr& mac, Nanos now, bool create, OnResolved&& on_resolved) {
    Entry* e = find(ip);
    if (!e) {
        if (!create) return;
        e = allocate();
        if (!e) {
            ++counters_.entries_full;
            return;
        }
        e->ip = ip;
    }
    const bool was_incomplete = e->state == State::Incomplete;
    e->state = State::Reachable;
    e->mac = mac;
    e->deadline = now + cfg_.reachable_time;
    e->probes = 0;
    if (was_incomplete) ++counters_.resolved;
    release_waiters(ip, [&](uint64_t cookie) { on_resolved(cookie, mac); });
}

template <typename OnProbe, typename OnFailed>
void ArpCache::on_timer(Nanos now, OnProbe&& on_probe, OnFailed&& on_failed) {
    for (Entry& e : entries_) {
        if (e.state == State::Free || e.deadline > now) continue;
        if (e.state == State::Reachable) {
            e.state = State::Free;
            continue;
        }
        if (e.probes < cfg_.max_probes) {
            ++e.probes;
            e.deadline = now + cfg_.retransmit_time;
            on_probe(e.ip);
            continue;
        }
        ++counters_.failed;
        e.state = State::Free;
        release_waiters(e.ip, [&](uint64_t cookie) { on_failed(e.ip, cookie); });
    }
}

}  // namespace rocemu::host
