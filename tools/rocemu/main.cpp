#include <cstdlib>

#include <fmt/format.h>
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
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->capture_default_str();

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
    // A command that is not one (`rocemu bogus`, `rocemu fabric bogus`, or a
    // command this build lacks): say so and list them; CLI11 would only say
    // that a subcommand is required.
    std::string cmd = "rocemu";
    CLI::App* level = &app;
    for (int i = 1; i < argc && argv[i][0] != '-' && !level->get_subcommands({}).empty(); ++i) {
        std::string known;
        CLI::App* next = nullptr;
        for (CLI::App* sub : level->get_subcommands({})) {
            if (sub->get_name() == argv[i]) next = sub;
            known += (known.empty() ? "" : ", ") + sub->get_name();
        }
        if (next == nullptr) {
            fmt::print(stderr, "{}: '{}' is not a command (commands: {}); '{} --help' says what each does\n", cmd,
                       argv[i], known, cmd);
            return 2;
        }
        cmd += " " + next->get_name();
        level = next;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
        // Bad input exits 2, as every command's own refusals do, and names
        // the command it was given to.
        cmd = "rocemu";
        for (const CLI::App* a = &app; a != nullptr;) {
            const auto subs = a->get_subcommands();
            a = subs.empty() ? nullptr : subs.front();
            if (a != nullptr) cmd += " " + a->get_name();
        }
        fmt::print(stderr, "{}: {}\nRun '{} --help' for more information.\n", cmd, e.what(), cmd);
        return 2;
    }
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
