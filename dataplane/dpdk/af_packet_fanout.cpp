#include "dataplane/dpdk/af_packet_fanout.hpp"

#include <linux/if_packet.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace rocemu::dpdk {
namespace {

int kernel_setsockopt(int fd, int level, int optname, const void* optval, socklen_t optlen) {
    return static_cast<int>(syscall(SYS_setsockopt, fd, level, optname, optval, optlen));
}

// A group the PMD asked for (its whole PACKET_FANOUT argument) and the one
// the kernel gave instead. A port's sockets are opened one after another
// while it probes, so a handful of entries is plenty; the oldest is reused.
struct Moved {
    uint32_t asked = 0;
    uint32_t given = 0;
    bool used = false;
};
std::mutex g_mu;
std::array<Moved, 16> g_moved;
unsigned g_count = 0;

Moved* find(uint32_t asked) {
    for (Moved& m : g_moved)
        if (m.used && m.asked == asked) return &m;
    return nullptr;
}

int join(int fd, uint32_t arg) { return kernel_setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg); }

// PACKET_FANOUT failed with EINVAL: the id is another device's group (or
// the PMD's flags differ from that group's). Join the group this port was
// given before, or have the kernel create one with an id of its own.
int move_group(int fd, uint32_t asked) {
    std::lock_guard lock(g_mu);
    Moved* m = find(asked);
    if (m && join(fd, m->given) == 0) return 0;
    const uint32_t type_flags = asked >> 16;
    const uint32_t unique = (type_flags | PACKET_FANOUT_FLAG_UNIQUEID) << 16;
    if (join(fd, unique) != 0) return -1;
    uint32_t got = 0;
    socklen_t len = sizeof got;
    if (getsockopt(fd, SOL_PACKET, PACKET_FANOUT, &got, &len) != 0) return -1;
    const uint32_t given = (asked & 0xffff0000u) | (got & 0xffffu);
    if (!m) m = &g_moved[g_count % g_moved.size()];
    *m = Moved{asked, given, true};
    ++g_count;
    spdlog::info("af_packet: fanout group {:#06x} is another interface's in this network namespace; the kernel "
                 "gave group {:#06x}",
                 asked & 0xffffu, given & 0xffffu);
    return 0;
}

}  // namespace

unsigned af_packet_fanout_groups_moved() {
    std::lock_guard lock(g_mu);
    return g_count;
}

}  // namespace rocemu::dpdk

// Every setsockopt of the process comes here (the executables export it:
// see CMakeLists.txt); only a failed PACKET_FANOUT is treated differently.
extern "C" int setsockopt(int fd, int level, int optname, const void* optval, socklen_t optlen) {
    const int rc = rocemu::dpdk::kernel_setsockopt(fd, level, optname, optval, optlen);
    if (rc == 0 || errno != EINVAL || level != SOL_PACKET || optname != PACKET_FANOUT || !optval ||
        optlen < sizeof(uint32_t))
        return rc;
    uint32_t asked;
    std::memcpy(&asked, optval, sizeof asked);
    if (asked >> 16 & PACKET_FANOUT_FLAG_UNIQUEID) return rc;  // the caller asked the kernel to choose already
    if (rocemu::dpdk::move_group(fd, asked) == 0) return 0;
    errno = EINVAL;
    return -1;
}
