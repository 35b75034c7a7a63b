// The fabric time the processes of a split fabric on one machine share, in a
// small file of their link folder (DIR/fabric.clock) that each maps. Each
// process (node) owns one slot, on a cache line of its own, where it
// publishes its fabric time every loop turn; a node that takes part may run
// at most a lead (FabricClock::kLeadSteps of its clock's steps) ahead of the
// slowest other taking part. So when one process is descheduled, the others
// stop their fabric time within that lead instead of forwarding a gap's
// worth of frames the stopped one will take in a burst later: the whole
// fabric slows down together, and a rate the hosts node measures on its
// clock is one the links carried.
//
// A node that exits leaves; one that died without leaving (its pid gone) is
// dropped when somebody has waited for it long enough to look. Nodes on
// other machines share nothing (each machine has its own link folder),
// unless a ClockRelay is attached (`--clock fabric`): each node also owns a
// second slot, its view of the other machines' least time, which the relay
// writes and every node of this machine waits for as for a node of its own.
// Free of DPDK; see FabricClock for the use.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/units.hpp"
#include "fabric/live/clock_relay.hpp"

namespace rocemu::fabric::live {

class SharedClock {
public:
    // Maps (creating or growing) the file `path` with room for `nodes` slots;
    // this process owns slot `self` (< nodes). Does not take part yet.
    // nullptr and `error` naming the file if it cannot.
    static std::unique_ptr<SharedClock> open(const std::string& path, uint32_t nodes, uint32_t self,
                                             std::string& error);
    ~SharedClock();  // leaves, unmaps
    SharedClock(const SharedClock&) = delete;
    SharedClock& operator=(const SharedClock&) = delete;

    // Takes part from now on with fabric time `own`, after dropping the
    // slots of processes that are gone (an earlier run's, in a reused
    // folder). Returns the time to go on from: the least time of the others
    // taking part, if that is later than `own`.
    Nanos join(Nanos own);
    // Stops taking part: nobody waits for this process any more.
    void leave();
    // Publishes this process's fabric time (once joined); with a relay,
    // exchanges with the other machines when `real` (the TSC) is at least
    // `every` past the last exchange.
    void publish(Nanos now, Nanos real = Nanos{});
    // The least fabric time of the other processes taking part and of the
    // other machines as last heard; Nanos::max() when there is none.
    Nanos others_min() const;
    // Drops the slots whose process is gone.
    void drop_gone();

    // Exchanges this machine's least time with the other machines through
    // `r` at most every `every` of real time while joined.
    void attach(std::shared_ptr<ClockRelay> r, Nanos every);
    // This machine's clock: the clock file's device and inode (never 0).
    uint64_t domain() const { return domain_; }

private:
    // Plain words in the shared file, read and written through
    // std::atomic_ref (lock-free for both sizes, so across processes too).
    struct alignas(64) Slot {
        int64_t now;
        int32_t pid;  // 0: free (never joined, or left)
    };
    static_assert(std::atomic_ref<int64_t>::is_always_lock_free && std::atomic_ref<int32_t>::is_always_lock_free);

    SharedClock(Slot* slots, size_t bytes, uint32_t nodes, uint32_t self, uint64_t domain)
        : slots_(slots), bytes_(bytes), nodes_(nodes), self_(self), domain_(domain) {}
    // The least time of the slots [0, end) taken, slot `skip` left out.
    Nanos least(uint32_t end, uint32_t skip) const;
    // The least time of this machine's nodes taking part (this one too).
    Nanos machine_min() const { return least(nodes_, nodes_); }

    // nodes_ slots of the nodes' own times, then nodes_ of their views of
    // the other machines.
    Slot* slots_;
    size_t bytes_;
    uint32_t nodes_;
    uint32_t self_;
    uint64_t domain_;
    bool joined_ = false;
    std::shared_ptr<ClockRelay> relay_;
    Nanos relay_every_{};
    Nanos next_relay_{};
};

}  // namespace rocemu::fabric::live
