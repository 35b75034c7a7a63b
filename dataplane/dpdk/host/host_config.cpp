#include "dataplane/dpdk/host/host_config.hpp"

#include <fmt/format.h>

#include <charconv>

namespace rocemu::host {

namespace {

std::optional<unsigned> parse_uint(std::string_view s, int base = 10) {
    unsigned v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
}

}  // namespace

std::optional<uint32_t> parse_ipv4(std::string_view s) {
    uint32_t a = 0;
    for (int i = 0; i < 4; ++i) {
        const size_t dot = i < 3 ? s.find('.') : s.size();
        if (dot == std::string_view::npos) return std::nullopt;
        const std::optional<unsigned> octet = parse_uint(s.substr(0, dot));
        if (!octet || *octet > 255 || dot > 3) return std::nullopt;
        a = a << 8 | *octet;
        s = i < 3 ? s.substr(dot + 1) : std::string_view{};
    }
    return a;
}

std::optional<wire::MacAddr> parse_mac(std::string_view s) {
    wire::MacAddr m;
    if (s.size() != 17) return std::nullopt;
    for (int i = 0; i < 6; ++i) {
        if (i < 5 && s[static_cast<size_t>(i * 3 + 2)] != ':') return std::nullopt;
        const std::optional<unsigned> b = parse_uint(s.substr(static_cast<size_t>(i * 3), 2), 16);
        if (!b) return std::nullopt;
        m.b[static_cast<size_t>(i)] = static_cast<uint8_t>(*b);
    }
    return m;
}

std::optional<HostConfig> make_host_config(const HostOptions& o, const wire::MacAddr& port_mac, std::string& error) {
    HostConfig c;
    const size_t slash = o.ip.find('/');
    const std::optional<uint32_t> ip = parse_ipv4(std::string_view(o.ip).substr(0, slash));
    const unsigned prefix =
        slash == std::string::npos ? 0 : parse_uint(std::string_view(o.ip).substr(slash + 1)).value_or(0);
    if (!ip || *ip == 0 || prefix < 1 || prefix > 32) {
        error = fmt::format("--ip: '{}' is not valid (expected A.B.C.D/P with a non-zero address and P in 1-32)", o.ip);
        return std::nullopt;
    }
    c.ipv4 = *ip;
    c.prefix_len = static_cast<uint8_t>(prefix);
    if (o.mac.empty()) {
        c.mac = port_mac;
    } else {
        const std::optional<wire::MacAddr> mac = parse_mac(o.mac);
        if (!mac || mac->is_multicast() || *mac == wire::MacAddr{}) {
            error = fmt::format("--mac: '{}' is not valid (expected a unicast, non-zero xx:xx:xx:xx:xx:xx)", o.mac);
            return std::nullopt;
        }
        c.mac = *mac;
    }
    if (!o.gateway.empty()) {
        c.gateway = parse_ipv4(o.gateway);
        if (!c.gateway) {
            error = fmt::format("--gateway: '{}' is not valid (expected A.B.C.D)", o.gateway);
            return std::nullopt;
        }
    }
    if (o.vlan != -1) {
        if (o.vlan < 1 || o.vlan > 4094) {
            error = fmt::format("--vlan: {} is out of range (allowed 1-4094)", o.vlan);
            return std::nullopt;
        }
        c.vlan = static_cast<uint16_t>(o.vlan);
    }
    if (o.pcp < 0 || o.pcp > 7) {
        error = fmt::format("--pcp: {} is out of range (allowed 0-7)", o.pcp);
        return std::nullopt;
    }
    c.pcp = static_cast<uint8_t>(o.pcp);
    const std::optional<GidLayout> layout = parse_gid_layout(o.gid_layout);
    if (!layout) {
        error = fmt::format("--gid-layout: '{}' is not valid (allowed connectx, rxe)", o.gid_layout);
        return std::nullopt;
    }
    c.gid_layout = *layout;
    if (o.ecn == "ect0") c.ecn = wire::ecn::kEct0;
    else if (o.ecn == "ect1") c.ecn = wire::ecn::kEct1;
    else if (o.ecn == "off") c.ecn = wire::ecn::kNotEct;
    else {
        error = fmt::format("--ecn: '{}' is not valid (allowed ect0, ect1, off)", o.ecn);
        return std::nullopt;
    }
    if (o.port_mtu < 68 || o.port_mtu > 9600) {
        error = fmt::format("--mtu: {} is out of range (allowed 68-9600)", o.port_mtu);
        return std::nullopt;
    }
    c.port_mtu = Bytes{static_cast<uint64_t>(o.port_mtu)};
    return c;
}

}  // namespace rocemu::host
