// Next-send-time pacing for one QP: the transmit scheduler asks when the QP may
// send next and never busy-waits on time.
#pragma once

#include "common/units.hpp"

namespace rocemu::cc {

class Pacer {
public:
    explicit Pacer(BitsPerSec rate) : rate_(rate) {}

    // A send that is late by less than one gap keeps the schedule, so a coarse
    // scheduler tick costs no rate; a longer idle period earns no burst credit.
    void on_tx(Bytes wire_bytes, Nanos now) {
        last_start_ = (now < next_ + gap_) ? next_ : now;
        last_bytes_ = wire_bytes;
        gap_ = rate_.serialise(wire_bytes);
        next_ = last_start_ + gap_;
    }

    // A new rate applies to the gap being waited out, so a QP throttled to a
    // low rate does not sleep through a recovery.
    void set_rate(BitsPerSec rate) {
        rate_ = rate;
        gap_ = rate_.serialise(last_bytes_);
        next_ = last_start_ + gap_;
    }

    BitsPerSec rate() const { return rate_; }
    Nanos next_send_time() const { return next_; }

private:
    BitsPerSec rate_;
    Nanos last_start_{0};
    Bytes last_bytes_{0};
    Nanos gap_{0};
    Nanos next_{0};
};

}  // namespace rocemu::cc
