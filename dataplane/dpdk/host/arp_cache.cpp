#include "dataplane/dpdk/host/arp_cache.hpp"

namespace rocemu::host {

ArpCache::Entry* ArpCache::find(uint32_t ip) {
    for (Entry& e : entries_)
        if (e.state != State::Free && e.ip == ip) return &e;
    return nullptr;
}

const ArpCache::Entry* ArpCache::find(uint32_t ip) const {
    for (const Entry& e : entries_)
        if (e.state != State::Free && e.ip == ip) return &e;
    return nullptr;
}

// A free slot, else the reachable entry closest to expiry. Incomplete entries
// are never evicted: their waiters are owed an answer.
ArpCache::Entry* ArpCache::allocate() {
    Entry* victim = nullptr;
    for (Entry& e : entries_) {
        if (e.state == State::Free) return &e;
        if (e.state == State::Reachable && (!victim || e.deadline < victim->deadline)) victim = &e;
    }
    if (victim) {
        ++counters_.evicted;
        *victim = Entry{};
    }
    return victim;
}

std::optional<wire::MacAddr> ArpCache::lookup(uint32_t ip, Nanos now) const {
    const Entry* e = find(ip);
    if (!e || e->state != State::Reachable || e->deadline <= now) return std::nullopt;
    return e->mac;
}

ArpCache::Lookup ArpCache::resolve(uint32_t ip, Nanos now, uint64_t cookie) {
    Lookup r;
    Entry* e = find(ip);
    if (e && e->state == State::Reachable && e->deadline > now) {
        r.status = Status::Hit;
        r.mac = e->mac;
        return r;
    }
    if (waiters_.full()) {
        ++counters_.waiters_full;
        return r;
    }
    if (!e || e->state != State::Incomplete) {
        if (!e) e = allocate();
        if (!e) {
            ++counters_.entries_full;
            return r;
        }
        e->state = State::Incomplete;
        e->ip = ip;
        e->probes = 1;
        e->deadline = now + cfg_.retransmit_time;
        r.send_request = true;
    }
    waiters_.push_back({ip, cookie});
    r.status = Status::Pending;
    return r;
}

Nanos ArpCache::next_timer() const {
    Nanos t = Nanos::max();
    for (const Entry& e : entries_)
        if (e.state != State::Free && e.deadline < t) t = e.deadline;
    return t;
}

size_t ArpCache::size() const {
    size_t n = 0;
    for (const Entry& e : entries_) n += e.state != State::Free;
    return n;
}

}  // namespace rocemu::host
