// Each subcommand of `rocemu` registers itself on the CLI11 app and returns
// the exit status through `status` when run.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <string>

namespace rocemu::cli {

// A whole number from 0 to 2^64 - 1, for uint64_t options such as --seed:
// CLI11 alone takes "-1" as 2^64 - 1 and clamps what is larger.
inline const CLI::Validator kWholeNumber(
    [](std::string& s) -> std::string {
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc{} || end != s.data() + s.size())
            return "'" + s + "' is not a whole number from 0 to 18446744073709551615";
        return {};
    },
    "UINT64");

// A value that must say something: `-o ""` would write no report at all,
// `-c ""` would quietly run the default fabric.
inline const CLI::Validator kNonEmpty(
    [](std::string& s) -> std::string { return s.empty() ? "must not be empty" : std::string{}; }, "NONEMPTY");

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
