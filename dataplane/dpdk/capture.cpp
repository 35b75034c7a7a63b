#include "dataplane/dpdk/capture.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_pcapng.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rocemu::dpdk {

namespace {
constexpr uint16_t kBatch = 32;
}

std::unique_ptr<Capture> Capture::open(const std::string& path, uint32_t snaplen, std::string& error) {
    std::unique_ptr<Capture> c(new Capture);
    // A copy holds the frame plus the pcapng block around it in one mbuf,
    // whose data room is 16 bits.
    c->snaplen_ = std::min(snaplen, kMaxSnaplen);
    c->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (c->fd_ < 0) {
        error = fmt::format("--capture {}: {}", path, std::strerror(errno));
        return nullptr;
    }
    c->pool_ = rte_pktmbuf_pool_create("rocemu_capture", 4095, 256, 0,
                                       static_cast<uint16_t>(rte_pcapng_mbuf_size(c->snaplen_)), SOCKET_ID_ANY);
    if (!c->pool_) {
        error = fmt::format("--capture {}: cannot create the copy pool: {}", path, rte_strerror(rte_errno));
        return nullptr;
    }
    c->pcapng_ = rte_pcapng_fdopen(c->fd_, "Linux", "rocemu software RoCE NIC", "rocemu", nullptr);
    if (!c->pcapng_) {
        error = fmt::format("--capture {}: cannot start the pcapng file: {}", path, rte_strerror(rte_errno));
        return nullptr;
    }
    return c;
}

uint16_t Capture::record(uint16_t port, rte_mbuf* const* pkts, uint16_t n, bool tx) {
    rte_mbuf* copies[kBatch];
    uint16_t lost = 0;
    const uint64_t tsc = rte_get_tsc_cycles();
    for (uint16_t done = 0; done < n;) {
        uint16_t k = 0;
        for (; done < n && k < kBatch; ++done) {
            rte_mbuf* c = rte_pcapng_copy(port, 0, pkts[done], pool_, snaplen_, tsc,
                                          tx ? RTE_PCAPNG_DIRECTION_OUT : RTE_PCAPNG_DIRECTION_IN);
            if (c) copies[k++] = c;
            else ++lost;
        }
        if (k) {
            rte_pcapng_write_packets(pcapng_, copies, k);
            // The writer does not free the copies (dpdk-dumpcap frees them
            // too); without this the pool runs dry after 4095 frames.
            rte_pktmbuf_free_bulk(copies, k);
        }
    }
    return lost;
}

Capture::~Capture() {
    // rte_pcapng_close closes the file descriptor too.
    if (pcapng_) rte_pcapng_close(pcapng_);
    else if (fd_ >= 0) ::close(fd_);
    if (pool_) rte_mempool_free(pool_);
}

}  // namespace rocemu::dpdk
