#include "dataplane/dpdk/eal.hpp"

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "dataplane/dpdk/eal_args.hpp"

namespace rocemu::dpdk {

namespace {
bool g_running = false;
bool g_own_prefix = false;  // the prefix is ours (rocemu-<pid>), so is its runtime directory
std::string g_prefix;
}  // namespace

bool Eal::init(const std::vector<std::string>& user_args, std::string& error) {
    if (g_running) return true;
    // A PMD's peer may close its socket first (virtio_user's vhost-user
    // peer, memif's control channel): the next send on it must fail with
    // EPIPE, which the PMD handles, not kill the process with SIGPIPE.
    if (std::signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        error = "cannot ignore SIGPIPE";
        return false;
    }
    EalArgs args = make_eal_args(user_args, static_cast<long>(getpid()));
    std::vector<char*> argv;
    for (std::string& a : args.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = rte_eal_init(static_cast<int>(args.argv.size()), argv.data());
    if (rc < 0) {
        std::string joined;
        for (const std::string& a : args.argv) joined += (joined.empty() ? "" : " ") + a;
        error = fmt::format("EAL initialisation failed ({}) with arguments: {}", rte_strerror(rte_errno), joined);
        return false;
    }
    g_running = true;
    g_prefix = args.file_prefix;
    g_own_prefix = !g_prefix.empty() && g_prefix == "rocemu-" + std::to_string(getpid());
    return true;
}

const std::string& Eal::file_prefix() { return g_prefix; }

bool Eal::running() { return g_running; }

void Eal::cleanup() {
    if (!g_running) return;
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    g_running = false;
    // The EAL leaves its runtime directory behind; a per-pid one would pile up.
    std::error_code ec;
    if (g_own_prefix) std::filesystem::remove_all(runtime_dir, ec);
}

void Eal::remove_own_runtime_dir() {
    std::error_code ec;
    if (g_running && g_own_prefix) std::filesystem::remove_all(rte_eal_get_runtime_dir(), ec);
}

}  // namespace rocemu::dpdk
