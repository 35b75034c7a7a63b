#include <cstdlib>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "common/malloc_thp.hpp"
#ifdef ROCEMU_WITH_DPDK
#include "dataplane/dpdk/eal.hpp"
#endif
#include "tools/rocemu/commands.hpp"
#include "tools/rocemu/crash.hpp"

int main(int argc, char** argv) {
    rocemu::restart_with_malloc_thp(argv);  // fabrics' NIC state on 2 MiB pages
    rocemu::cli::install_crash_report("rocemu");
    CLI::App app{"rocemu: a software RoCEv2 NIC and lossless-fabric emulator"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "rocemu 0.1.0");
    std::string log_level = "info";
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")->capture_default_str();

    int status = 0;
    rocemu::cli::add_pcap_command(app, status);
    rocemu::cli::add_demo_command(app, status);
    rocemu::cli::add_fabric_command(app, status);
    rocemu::cli::add_counters_command(app, status);
#ifdef ROCEMU_WITH_DPDK
    rocemu::cli::add_host_command(app, status);
    rocemu::cli::add_verbs_commands(app, status);
    rocemu::cli::add_switch_command(app, status);
    rocemu::cli::add_rdma_ops_command(app, status);
#endif

    app.parse_complete_callback([&] {
        spdlog::set_level(spdlog::level::from_str(log_level));
        const char* tunables = std::getenv("GLIBC_TUNABLES");
        spdlog::debug("glibc tunables: {}", tunables ? tunables : "(none)");
    });
    CLI11_PARSE(app, argc, argv);
#ifdef ROCEMU_WITH_DPDK
    // A command that started DPDK and left it running (pingpong, perf,
    // rdma-ops; their ports are kept open, Port::keep_open_at_exit) may still
    // have the EAL's interrupt thread in a PMD's deferred work: memif handles
    // the peer's disconnect there. exit()'s destructors raced it (a SIGSEGV in
    // that thread as the process ended, about 1 pingpong run in 8 over memif).
    // _Exit ends every thread at once.
    if (rocemu::dpdk::Eal::running()) {
        spdlog::shutdown();
        std::fflush(nullptr);
        rocemu::dpdk::Eal::remove_own_runtime_dir();
        std::_Exit(status);
    }
#endif
    return status;
}
