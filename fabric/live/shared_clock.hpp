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
// other machines share nothing (each machine has its own link folder).
// Free of DPDK; see FabricClock for the use.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/units.hpp"

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
    // Publishes this process's fabric time (once joined).
    void publish(Nanos now);
    // The least fabric time of the other processes taking part;
    // Nanos::max() when there is none.
    Nanos others_min() const;
    // Drops the slots whose process is gone.
    void drop_gone();

private:
    // Plain words in the shared file, read and written through
    // std::atomic_ref (lock-free for both sizes, so across processes too).
    struct alignas(64) Slot {
        int64_t now;
        int32_t pid;  // 0: free (never joined, or left)
    };
    static_assert(std::atomic_ref<int64_t>::is_always_lock_free && std::atomic_ref<int32_t>::is_always_lock_free);

    SharedClock(Slot* slots, size_t bytes, uint32_t nodes, uint32_t self)
        : slots_(slots), bytes_(bytes), nodes_(nodes), self_(self) {}

    Slot* slots_;
    size_t bytes_;
    uint32_t nodes_;
    uint32_t self_;
    bool joined_ = false;
};

}  // namespace rocemu::fabric::live
