// The switch's names for the one link model (link/link.hpp): each live port's
// egress cable is a link::Model, configured by parse_link_config() or the
// --link keys, so a fault scenario behaves as it does in virtual time.
#pragma once

#include "link/link.hpp"

namespace rocemu::sw {

using Corruption = link::Corruption;
using PfcStorm = link::PfcStorm;
using LinkConfig = link::Config;
using LinkFate = link::Fate;
using LinkDelivery = link::Delivery;
using LinkCounters = link::Counters;
using Link = link::Model;

}  // namespace rocemu::sw
