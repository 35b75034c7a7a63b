// `rocemu counters`: read the counters of running rocemu processes through
// their DPDK telemetry sockets.
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tools/rocemu/commands.hpp"

namespace rocemu::cli {

namespace {

struct CountersOptions {
    std::string file_prefix;
    bool json = false;
    bool all = false;
};

// Where the EAL keeps runtime directories: /var/run/dpdk for root, else
// $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk.
std::filesystem::path runtime_base() {
    if (getuid() == 0) return "/var/run/dpdk";
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    return std::filesystem::path(xdg ? xdg : "/tmp") / "dpdk";
}

class TelemetryClient {
public:
    bool connect(const std::filesystem::path& socket_path, std::string& error) {
        fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            error = fmt::format("cannot connect to {}: {}", socket_path.string(), std::strerror(errno));
            return false;
        }
        return !receive().empty();  // the greeting: version, pid, max output length
    }
    std::string query(const std::string& cmd) {
        if (::send(fd_, cmd.data(), cmd.size(), 0) < 0) return {};
        return receive();
    }
    ~TelemetryClient() {
        if (fd_ >= 0) ::close(fd_);
    }

private:
    std::string receive() {
        std::string buf(1 << 16, '\0');
        const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
        return buf;
    }
    int fd_ = -1;
};

// Our replies are flat: {"/cmd": [ints]} or {"/cmd": {"key": value, ...}}
// with keys made of [a-z0-9_] and values integers or one plain string.
std::vector<std::pair<std::string, std::string>> flat_pairs(const std::string& json) {
    std::vector<std::pair<std::string, std::string>> out;
    size_t p = json.find(':');  // skip the command name
    while ((p = json.find('"', p + 1)) != std::string::npos) {
        const size_t key_end = json.find('"', p + 1);
        if (key_end == std::string::npos || key_end + 1 >= json.size() || json[key_end + 1] != ':') break;
        const std::string key = json.substr(p + 1, key_end - p - 1);
        size_t v = key_end + 2;
        size_t v_end;
        if (json[v] == '"') {
            v_end = json.find('"', v + 1);
            out.emplace_back(key, json.substr(v + 1, v_end - v - 1));
            p = v_end;
        } else {
            v_end = json.find_first_of(",}", v);
            out.emplace_back(key, json.substr(v, v_end - v));
            p = v_end;
        }
        if (p == std::string::npos) break;
    }
    return out;
}

std::vector<int> int_array(const std::string& json) {
    std::vector<int> ids;
    const size_t open = json.find('[');
    const size_t close = json.find(']');
    if (open == std::string::npos || close == std::string::npos) return ids;
    std::string body = json.substr(open + 1, close - open - 1);
    size_t p = 0;
    while (p < body.size()) {
        const size_t comma = body.find(',', p);
        const std::string item = body.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
        if (!item.empty()) ids.push_back(std::stoi(item));
        if (comma == std::string::npos) break;
        p = comma + 1;
    }
    return ids;
}

int show(const std::string& prefix, const CountersOptions& o) {
    const std::filesystem::path sock = runtime_base() / prefix / "dpdk_telemetry.v2";
    TelemetryClient c;
    std::string error;
    if (!c.connect(sock, error)) {
        fmt::print(stderr, "rocemu counters: {}: {}\n", prefix, error);
        return 2;
    }
    const std::string ports = c.query("/rocemu/ports");
    if (o.json) fmt::print("{}\n", ports);
    for (const int id : int_array(ports)) {
        const std::string stats = c.query(fmt::format("/rocemu/port_stats,{}", id));
        if (o.json) {
            fmt::print("{}\n", stats);
            continue;
        }
        std::string name;
        std::vector<std::pair<std::string, std::string>> rows;
        for (auto& [k, v] : flat_pairs(stats)) {
            if (k == "name") name = v;
            else if (o.all || v != "0") rows.emplace_back(k, v);
        }
        fmt::print("{} port {} ({})\n", prefix, id, name);
        for (const auto& [k, v] : rows) fmt::print("  {:<28} {:>14}\n", k, v);
    }
    return 0;
}

int run_counters(const CountersOptions& o) {
    if (!o.file_prefix.empty()) return show(o.file_prefix, o);
    std::vector<std::string> prefixes;
    std::error_code ec;
    for (const auto& d : std::filesystem::directory_iterator(runtime_base(), ec)) {
        const std::string name = d.path().filename().string();
        if (name.starts_with("rocemu") && std::filesystem::exists(d.path() / "dpdk_telemetry.v2")) prefixes.push_back(name);
    }
    if (prefixes.empty()) {
        fmt::print(stderr, "rocemu counters: no running rocemu process found under {}\n", runtime_base().string());
        return 2;
    }
    int status = 0;
    for (const std::string& p : prefixes) status = std::max(status, show(p, o));
    return status;
}

}  // namespace

void add_counters_command(CLI::App& app, int& status) {
    auto o = std::make_shared<CountersOptions>();
    CLI::App* cmd = app.add_subcommand(
        "counters",
        "Show the per-port counters (packets, bytes, ARP, ICMP, drops by reason) of running rocemu processes, read "
        "from their DPDK telemetry sockets. Without --file-prefix, every rocemu* process found is shown. Zero "
        "counters are hidden unless --all.");
    cmd->add_option("--file-prefix", o->file_prefix, "the process's EAL --file-prefix (rocemu host prints it)");
    cmd->add_flag("--json", o->json, "print the telemetry replies as they are (JSON)");
    cmd->add_flag("-a,--all", o->all, "include counters that are zero");
    cmd->callback([o, &status] { status = run_counters(*o); });
}

}  // namespace rocemu::cli
