// The process's one DPDK EAL. A second EAL in the same process is impossible,
// so every NIC of a process shares this one (each as its own port).
#pragma once

#include <string>
#include <vector>

namespace rocemu::dpdk {

class Eal {
public:
    // Starts the EAL with make_eal_args(user) on the first call; later calls
    // return true without doing anything. On failure `error` says why.
    static bool init(const std::vector<std::string>& user_args, std::string& error);
    // Whether init() has started the EAL and cleanup() has not released it.
    static bool running();
    // Empty when the EAL runs --in-memory (then there is no telemetry socket).
    static const std::string& file_prefix();
    // Releases the EAL's resources (its runtime directory, memory). Call once,
    // after every port is closed.
    static void cleanup();
    // Removes the EAL's runtime directory if it is this process's own
    // (prefix rocemu-<pid>), without releasing anything else: for a process
    // about to _Exit. A prefix the user chose may be another process's too.
    static void remove_own_runtime_dir();
};

}  // namespace rocemu::dpdk
