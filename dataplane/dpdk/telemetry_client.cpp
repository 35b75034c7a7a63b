#include "dataplane/dpdk/telemetry_client.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace rocemu::dpdk {

namespace {

class Connection {
public:
    bool open(const std::filesystem::path& path, std::string& error) {
        fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            error = fmt::format("cannot connect to {}: {}", path.string(), std::strerror(errno));
            return false;
        }
        if (receive().empty()) {  // the greeting: version, pid, max output length
            error = fmt::format("{} sent no greeting", path.string());
            return false;
        }
        return true;
    }
    std::string query(const std::string& cmd) {
        if (::send(fd_, cmd.data(), cmd.size(), 0) < 0) return {};
        return receive();
    }
    ~Connection() {
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

// The value part of {"/cmd": VALUE}; empty for null or a malformed reply.
std::string value_of(const std::string& reply) {
    const size_t colon = reply.find(':');
    if (colon == std::string::npos || reply.size() < colon + 2) return {};
    std::string v = reply.substr(colon + 1, reply.size() - colon - 2);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v == "null" ? std::string{} : v;
}

// rocemu's dicts are flat: keys of [a-z0-9_], values integers or plain strings.
Fields dict_fields(const std::string& v) {
    Fields out;
    size_t p = 0;
    while ((p = v.find('"', p)) != std::string::npos) {
        const size_t key_end = v.find('"', p + 1);
        if (key_end == std::string::npos || key_end + 2 >= v.size() || v[key_end + 1] != ':') break;
        std::string key = v.substr(p + 1, key_end - p - 1);
        size_t start = key_end + 2, end;
        if (v[start] == '"') {
            end = v.find('"', start + 1);
            if (end == std::string::npos) break;
            out.emplace_back(std::move(key), v.substr(start + 1, end - start - 1));
            p = end + 1;
        } else {
            end = v.find_first_of(",}", start);
            if (end == std::string::npos) break;
            out.emplace_back(std::move(key), v.substr(start, end - start));
            p = end;
        }
    }
    return out;
}

std::vector<long> int_array(const std::string& v) {
    std::vector<long> out;
    const char* p = v.c_str();
    while (*p) {
        char* end = nullptr;
        const long x = std::strtol(p, &end, 10);
        if (end == p) {
            ++p;
            continue;
        }
        out.push_back(x);
        p = end;
    }
    return out;
}

// Asks every command in order; `on_reply(cmd, reply)` sees each reply.
template <typename F>
bool walk(const std::string& prefix, std::string& error, F&& on_reply) {
    Connection c;
    if (!c.open(telemetry_socket(prefix), error)) return false;
    const std::string ports = c.query("/rocemu/ports");
    on_reply("ports", -1, ports);
    for (const long id : int_array(value_of(ports))) {
        on_reply("port_stats", id, c.query(fmt::format("/rocemu/port_stats,{}", id)));
        const std::string engine = c.query(fmt::format("/rocemu/engine_stats,{}", id));
        if (value_of(engine).empty()) continue;
        on_reply("engine_stats", id, engine);
        const std::string qps = c.query(fmt::format("/rocemu/qps,{}", id));
        on_reply("qps", id, qps);
        for (const long qpn : int_array(value_of(qps)))
            on_reply("qp_stats", qpn, c.query(fmt::format("/rocemu/qp_stats,{},{}", id, qpn)));
    }
    // A soft-switch process (switch/dpdk) lists its ports under /rocemu/switch.
    const std::string sw_ports = c.query("/rocemu/switch/ports");
    if (!value_of(sw_ports).empty()) on_reply("switch_ports", -1, sw_ports);
    for (const long id : int_array(value_of(sw_ports)))
        on_reply("switch_port_stats", id, c.query(fmt::format("/rocemu/switch/port_stats,{}", id)));
    return true;
}

}  // namespace

std::filesystem::path telemetry_socket(const std::string& file_prefix) {
    return dpdk_runtime_base() / file_prefix / "dpdk_telemetry.v2";
}

std::optional<std::vector<PortReport>> read_counters(const std::string& file_prefix, std::string& error) {
    std::vector<PortReport> ports;
    const bool ok = walk(file_prefix, error, [&](std::string_view what, long n, const std::string& reply) {
        if (what == "port_stats" || what == "switch_port_stats") {
            PortReport r;
            r.id = n;
            for (auto& [k, v] : dict_fields(value_of(reply))) {
                if (k == "name") r.name = what == "port_stats" ? v : "switch " + v;
                else r.counters.emplace_back(std::move(k), std::move(v));
            }
            ports.push_back(std::move(r));
        } else if (what == "engine_stats" && !ports.empty()) {
            ports.back().engine = dict_fields(value_of(reply));
        } else if (what == "qp_stats" && !ports.empty()) {
            ports.back().qps.push_back(QpReport{n, dict_fields(value_of(reply))});
        }
    });
    if (!ok) return std::nullopt;
    return ports;
}

std::optional<std::vector<std::string>> read_counters_json(const std::string& file_prefix, std::string& error) {
    std::vector<std::string> replies;
    if (!walk(file_prefix, error, [&](std::string_view, long, const std::string& r) { replies.push_back(r); }))
        return std::nullopt;
    return replies;
}

}  // namespace rocemu::dpdk
