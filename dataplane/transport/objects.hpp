// Verbs objects other than QPs: protection domains, memory regions, completion
// queues, shared receive queues and UD address handles. All storage is sized
// at creation; the per-packet path only indexes into it.
#pragma once

#include <cstdint>
#include <vector>

#include "dataplane/transport/types.hpp"

namespace rocemu::transport {

struct Pd {
    bool live = false;
    uint32_t users = 0;  // MRs, QPs, SRQs and AHs that name this PD
};

// A memory region over caller memory. The VA is the host address, as in
// ibverbs, so an SGE's addr is an ordinary pointer value.
struct Mr {
    bool live = false;
    uint32_t pd = 0;
    uint64_t va = 0;
    uint64_t length = 0;
    uint32_t access = 0;
    uint32_t key = 0;  // lkey == rkey: index << 8 | generation byte
    // alloc_null_mr: no memory behind it. It covers every address, grants no
    // access (so it is neither written nor reached by rkey) and reads as zeros.
    // alloc_discard_mr: the same with kRemoteWrite; what a WRITE carries into
    // it is dropped.
    bool null = false;

    // True when [va, va+len) lies inside the region. len 0 is always inside.
    bool covers(uint64_t at, uint64_t len) const {
        if (len == 0) return true;
        return at >= va && len <= length && at - va <= length - len;
    }
    uint8_t* ptr(uint64_t at) const { return reinterpret_cast<uint8_t*>(at); }
};

// A completion queue: a ring the engine produces into and poll_cq drains.
struct Cq {
    bool live = false;
    uint32_t users = 0;
    std::vector<Wc> ring;  // capacity is a power of two
    uint32_t head = 0, tail = 0;
    uint64_t overflows = 0;
    bool notified = false;  // an event is already pending in this Effects round

    uint32_t size() const { return tail - head; }
    // The slot of the next entry; nullptr (counted) when the ring is full.
    Wc* next() {
        if (size() == ring.size()) {
            ++overflows;
            return nullptr;
        }
        return &ring[tail++ & (ring.size() - 1)];
    }
    bool push(const Wc& wc) {
        Wc* slot = next();
        if (slot == nullptr) return false;
        *slot = wc;
        return true;
    }
};

struct RecvWqe {
    uint64_t wr_id = 0;
    SgeList sg_list;
    uint64_t length = 0;
};

// A ring of posted receive WQEs, used both for a QP's own RQ and for an SRQ.
struct RecvQueue {
    std::vector<RecvWqe> ring;  // power-of-two capacity
    uint32_t head = 0, tail = 0;

    void init(uint32_t cap) {
        uint32_t n = 1;
        while (n < cap) n <<= 1;
        ring.assign(n, RecvWqe{});
        head = tail = 0;
    }
    uint32_t size() const { return tail - head; }
    bool full() const { return size() == ring.size(); }
    bool empty() const { return head == tail; }
    RecvWqe& front() { return ring[head & (ring.size() - 1)]; }
    void pop() { ++head; }
    // Written in place, and only the SGEs in use: a RecvWqe built on the
    // stack and copied costs more than the rest of posting.
    void push(const RecvWr& wr) {
        RecvWqe& w = ring[tail++ & (ring.size() - 1)];
        w.wr_id = wr.wr_id;
        w.sg_list.clear();
        w.length = 0;
        for (const Sge& s : wr.sg_list) {
            w.sg_list.push_back(s);
            w.length += s.length;
        }
    }
};

struct Srq {
    bool live = false;
    uint32_t pd = 0;
    uint32_t users = 0;
    uint32_t max_sge = kMaxSge;
    RecvQueue rq;
};

struct Ah {
    bool live = false;
    uint32_t pd = 0;
    AddressVector av;
};

}  // namespace rocemu::transport
