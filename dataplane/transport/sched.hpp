// The transport engine's slot times (common/slot_sched.hpp), one slot per QP.
//
// The engine answers next_timer() and tx_pending() after every event, and
// on_timer() and tx_burst() act on a few QPs each; a fabric NIC may hold
// hundreds of QPs. Whoever may change a QP marks its slot; the engine
// recomputes the marked slots before it reads the tree.
#pragma once

#include <cstdint>

#include "common/slot_sched.hpp"

namespace rocemu::transport {

struct QpSchedKeys {
    enum Key : uint8_t {
        Timer,    // next_timer()'s contribution
        Wake,     // on_timer() has something to do
        Control,  // an ACK, NAK, READ response or CNP waits to be sent
        Pending,  // tx_pending()'s data part: a request or resend is ready
        Send,     // tx_burst()'s data round has something to do (send, or see a pacing gate pass)
        kKeys
    };
};

class QpSched : public QpSchedKeys, public SlotSched<QpSchedKeys::kKeys> {};

}  // namespace rocemu::transport
