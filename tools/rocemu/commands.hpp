// Each subcommand of `rocemu` registers itself on the CLI11 app and returns
// the exit status through `status` when run.
#pragma once

#include <CLI/CLI.hpp>

namespace rocemu::cli {

void add_pcap_command(CLI::App& app, int& status);
void add_demo_command(CLI::App& app, int& status);
void add_fabric_command(CLI::App& app, int& status);
void add_counters_command(CLI::App& app, int& status);
#ifdef ROCEMU_WITH_DPDK
void add_host_command(CLI::App& app, int& status);
void add_verbs_commands(CLI::App& app, int& status);  // pingpong, perf
void add_switch_command(CLI::App& app, int& status);
void add_rdma_ops_command(CLI::App& app, int& status);
#endif

}  // namespace rocemu::cli
