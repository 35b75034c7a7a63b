#include "fabric/live/capture.hpp"

#include <fmt/format.h>
#include <rte_errno.h>
#include <rte_mbuf.h>

#include <ctime>

namespace rocemu::fabric::live {

std::unique_ptr<LinkCapture> LinkCapture::open(const std::string& path, std::string& error) {
    std::unique_ptr<LinkCapture> c(new LinkCapture(path));
    if (!c->writer_.ok()) {
        error = fmt::format("--pcap: cannot write {}: {}", path, c->writer_.error());
        return nullptr;
    }
    c->copy_.resize(UINT16_MAX);
    return c;
}

LinkCapture::~LinkCapture() {
    // The callbacks' memory stays with DPDK (a poll may be inside one); this
    // process polls from one thread, so none is running here.
    for (const auto& [port, cb] : taps_) rte_eth_remove_rx_callback(port, 0, cb);
    writer_.flush();
}

bool LinkCapture::tap(uint16_t port, std::string& error) {
    const rte_eth_rxtx_callback* cb = rte_eth_add_rx_callback(port, 0, &LinkCapture::on_rx, this);
    if (!cb) {
        error = fmt::format("--pcap: cannot tap ethdev {}: {}", port, rte_strerror(rte_errno));
        return false;
    }
    taps_.emplace_back(port, cb);
    return true;
}

uint16_t LinkCapture::on_rx(uint16_t, uint16_t, rte_mbuf* pkts[], uint16_t n, uint16_t, void* self) {
    if (n == 0) return 0;
    auto& c = *static_cast<LinkCapture*>(self);
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const Nanos at{static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec};
    for (uint16_t i = 0; i < n; ++i) {
        const uint32_t len = std::min<uint32_t>(rte_pktmbuf_pkt_len(pkts[i]), static_cast<uint32_t>(c.copy_.size()));
        const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(pkts[i], 0, len, c.copy_.data()));
        if (p) c.writer_.write(at, {p, len});
    }
    c.frames_ += n;
    return n;
}

}  // namespace rocemu::fabric::live
