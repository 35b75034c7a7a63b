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

void Mmu::reset() {
    const std::size_t n = cfg_.ports.size();
    std::fill_n(pg_.get(), n * kNumTc, PgState{});
    std::fill_n(queue_.get(), n * kNumTc, Bytes{});
    std::fill_n(port_.get(), n, Bytes{});
    pool_used_ = Bytes{};
}

}  // namespace rocemu::sw
