// pcapng capture from inside the process (dpdk-dumpcap cannot attach to a
// --no-huge primary). Frames are copied as they are received and as they are
// queued for transmission, with the port as the pcapng interface and the
// direction recorded. Open it after every port exists: rte_pcapng writes an
// interface block only for ports present at open.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct rte_mbuf;
struct rte_mempool;
struct rte_pcapng;

namespace rocemu::dpdk {

class Capture {
public:
    // `snaplen`: the largest frame to keep whole (at most kMaxSnaplen); longer ones are cut.
    static constexpr uint32_t kMaxSnaplen = 16384;
    static std::unique_ptr<Capture> open(const std::string& path, uint32_t snaplen, std::string& error);
    ~Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;

    // Copies and writes `n` frames; returns how many could not be copied.
    uint16_t record(uint16_t port, rte_mbuf* const* pkts, uint16_t n, bool tx);

private:
    Capture() = default;

    int fd_ = -1;
    rte_pcapng* pcapng_ = nullptr;
    rte_mempool* pool_ = nullptr;
    uint32_t snaplen_ = 0;
};

}  // namespace rocemu::dpdk
