#include "switch/mmu.hpp"

namespace rocemu::sw {

Mmu::Mmu(const SwitchConfig& cfg)
    : cfg_(cfg),
      pg_(std::make_unique<PgState[]>(cfg.ports.size() * kNumTc)),
      queue_(std::make_unique<Bytes[]>(cfg.ports.size() * kNumTc)),
      port_(std::make_unique<Bytes[]>(cfg.ports.size())) {
    for (int q = 0; q < kNumTc; ++q) queue_lossless_[q] = cfg.queue_lossless_at(q);
    for (int pg = 0; pg < kNumTc; ++pg) pg_size_[pg] = profile(pg).size;
}

}  // namespace rocemu::sw
