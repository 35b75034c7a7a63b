// Where the EAL keeps its runtime directories, without DPDK itself: for
// code that finds or cleans another process's folder (the telemetry client,
// the split fabric's launcher), including builds without DPDK.
#pragma once

#include <cstdlib>
#include <filesystem>

#include <unistd.h>

namespace rocemu::dpdk {

// /var/run/dpdk for root, else $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk.
inline std::filesystem::path dpdk_runtime_base() {
    if (getuid() == 0) return "/var/run/dpdk";
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    return std::filesystem::path(xdg ? xdg : "/tmp") / "dpdk";
}

}  // namespace rocemu::dpdk
