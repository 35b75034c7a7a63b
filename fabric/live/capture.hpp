// `--pcap LINK` in live mode: the frames of one named link, written to a
// pcap as its ends receive them, stamped with real time (CLOCK_REALTIME, so
// the files of the nodes of one machine merge in order). A receive callback
// on each end's ethdev sees every frame exactly once, whoever polls the port
// (a switch runtime, a NIC's poll loop); a transmit callback would see a
// frame again each time a full queue refused it. In one process both ends
// write one file; split, each node writes the ends it has
// (`<link>@<node>.pcap` in its link folder) and the launcher merges them
// (split.hpp merge_pcaps).
#pragma once

#include <rte_ethdev.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"

namespace rocemu::fabric::live {

class LinkCapture {
public:
    // nullptr and `error` naming the file if it cannot be written.
    static std::unique_ptr<LinkCapture> open(const std::string& path, std::string& error);
    // Removes the callbacks and flushes the file.
    ~LinkCapture();
    LinkCapture(const LinkCapture&) = delete;
    LinkCapture& operator=(const LinkCapture&) = delete;

    // Every frame ethdev `port` receives on queue 0 from now on.
    bool tap(uint16_t port, std::string& error);
    // Writes what libpcap buffers: a process that leaves with _Exit calls it
    // first. False, with error(), if the file did not take it (a full disk).
    bool flush() { return writer_.flush(); }
    const std::string& error() const { return writer_.error(); }
    uint64_t frames() const { return frames_; }

private:
    explicit LinkCapture(const std::string& path) : writer_(path) {}
    static uint16_t on_rx(uint16_t port, uint16_t queue, rte_mbuf* pkts[], uint16_t n, uint16_t max, void* self);

    pcap::Writer writer_;
    std::vector<std::pair<uint16_t, const rte_eth_rxtx_callback*>> taps_;
    std::vector<uint8_t> copy_;  // a frame in several segments, gathered
    uint64_t frames_ = 0;
};

}  // namespace rocemu::fabric::live
