// The EAL argument list rocemu starts DPDK with: defaults that need neither
// hugepages nor PCI access and give each process its own runtime directory,
// followed by the user's own arguments, which replace a default they overlap.
#pragma once

#include <string>
#include <vector>

namespace rocemu::dpdk {

struct EalArgs {
    std::vector<std::string> argv;  // argv[0] is "rocemu"
    std::string file_prefix;        // where the telemetry socket lives; empty with --in-memory
};

// Defaults: --no-huge -m 512 --no-pci --file-prefix rocemu-<pid>.
//  --file-prefix from the user replaces ours;
//  -m or --socket-mem replaces -m 512;
//  --in-memory or --huge-dir drops --no-huge and -m 512 (hugepages wanted);
//  -a/--allow/-b/--block drops --no-pci (PCI devices wanted).
// True if `user` sets the EAL's memory (-m N, -mN or --socket-mem).
bool has_memory_option(const std::vector<std::string>& user);

EalArgs make_eal_args(const std::vector<std::string>& user, long pid);

}  // namespace rocemu::dpdk
