#include "dataplane/dpdk/eal_args.hpp"

#include <string_view>

namespace rocemu::dpdk {

namespace {

bool has_option(const std::vector<std::string>& args, std::string_view name) {
    for (const std::string& a : args) {
        if (a == name) return true;
        if (name.starts_with("--") && a.size() > name.size() && a.starts_with(name) && a[name.size()] == '=')
            return true;
        if (!name.starts_with("--") && a.size() > name.size() && a.starts_with(name)) return true;  // -m512, -a0000:...
    }
    return false;
}

// The value of --file-prefix in either "--file-prefix X" or "--file-prefix=X" form.
std::string file_prefix_of(const std::vector<std::string>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--file-prefix" && i + 1 < args.size()) return args[i + 1];
        if (args[i].starts_with("--file-prefix=")) return args[i].substr(14);
    }
    return {};
}

}  // namespace

bool has_memory_option(const std::vector<std::string>& user) {
    return has_option(user, "-m") || has_option(user, "--socket-mem");
}

EalArgs make_eal_args(const std::vector<std::string>& user, long pid) {
    EalArgs r;
    r.argv.push_back("rocemu");
    const bool hugepages = has_option(user, "--in-memory") || has_option(user, "--huge-dir");
    if (!hugepages) r.argv.push_back("--no-huge");
    if (!hugepages && !has_memory_option(user)) {
        r.argv.push_back("-m");
        r.argv.push_back("512");
    }
    const bool pci = has_option(user, "-a") || has_option(user, "--allow") || has_option(user, "-b") ||
                     has_option(user, "--block");
    if (!pci) r.argv.push_back("--no-pci");
    r.file_prefix = file_prefix_of(user);
    if (r.file_prefix.empty() && !has_option(user, "--in-memory")) {
        r.file_prefix = "rocemu-" + std::to_string(pid);
        r.argv.push_back("--file-prefix");
        r.argv.push_back(r.file_prefix);
    }
    r.argv.insert(r.argv.end(), user.begin(), user.end());
    return r;
}

}  // namespace rocemu::dpdk
