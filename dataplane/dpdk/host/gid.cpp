#include "dataplane/dpdk/host/gid.hpp"

#include <fmt/format.h>

#include "dataplane/wire/describe.hpp"

namespace rocemu::host {

const char* to_string(GidType t) { return t == GidType::RoceV1 ? "RoCEv1" : "RoCEv2"; }
const char* to_string(GidLayout l) { return l == GidLayout::ConnectX ? "connectx" : "rxe"; }

std::optional<GidLayout> parse_gid_layout(std::string_view s) {
    if (s == "connectx") return GidLayout::ConnectX;
    if (s == "rxe") return GidLayout::Rxe;
    return std::nullopt;
}

wire::IpAddr link_local_gid(const wire::MacAddr& mac) {
    wire::IpAddr g;
    g.b[0] = 0xfe;
    g.b[1] = 0x80;
    g.b[8] = mac.b[0] ^ 0x02;  // the universal/local bit is inverted in EUI-64
    g.b[9] = mac.b[1];
    g.b[10] = mac.b[2];
    g.b[11] = 0xff;
    g.b[12] = 0xfe;
    g.b[13] = mac.b[3];
    g.b[14] = mac.b[4];
    g.b[15] = mac.b[5];
    return g;
}

bool is_link_local(const wire::IpAddr& gid) {
    if (gid.b[0] != 0xfe || (gid.b[1] & 0xc0) != 0x80) return false;
    for (int i = 2; i < 8; ++i)
        if (gid.b[i] != 0) return false;
    return true;
}

std::optional<wire::MacAddr> mac_from_link_local(const wire::IpAddr& gid) {
    if (!is_link_local(gid) || gid.b[11] != 0xff || gid.b[12] != 0xfe) return std::nullopt;
    return wire::MacAddr{{static_cast<uint8_t>(gid.b[8] ^ 0x02), gid.b[9], gid.b[10], gid.b[13], gid.b[14], gid.b[15]}};
}

GidTable::GidTable(GidLayout layout, const wire::MacAddr& mac, std::optional<uint32_t> ipv4) : layout_(layout) {
    auto add = [&](const wire::IpAddr& gid) {
        if (layout_ == GidLayout::ConnectX) entries_.push_back({gid, GidType::RoceV1});
        entries_.push_back({gid, GidType::RoceV2});
    };
    add(link_local_gid(mac));
    if (ipv4) add(wire::IpAddr::from_v4(*ipv4));
}

int GidTable::find_v2(const wire::IpAddr& gid) const {
    for (size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].type == GidType::RoceV2 && entries_[i].gid == gid) return static_cast<int>(i);
    return -1;
}

int GidTable::default_v2_index() const {
    int ll = -1;
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].type != GidType::RoceV2) continue;
        if (entries_[i].gid.is_v4()) return static_cast<int>(i);
        if (ll < 0) ll = static_cast<int>(i);
    }
    return ll;
}

std::string format_gid(const wire::IpAddr& gid) {
    return gid.is_v4() ? "::ffff:" + wire::format_ip(gid) : wire::format_ip(gid);
}

std::string GidTable::describe(int index) const {
    const GidEntry& e = entries_[static_cast<size_t>(index)];
    return fmt::format("GID index {} ({} {})", index, to_string(e.type), format_gid(e.gid));
}

GidCheck GidTable::check_sgid_index(uint32_t index) const {
    GidCheck r;
    if (index >= entries_.size()) {
        r.error = fmt::format(
            "GID index {} does not exist: this port's GID table ({} layout) has indexes 0-{}; "
            "use {}",
            index, to_string(layout_), entries_.size() - 1, describe(default_v2_index()));
        return r;
    }
    const GidEntry& e = entries_[index];
    if (e.type == GidType::RoceV1) {
        r.error = fmt::format("GID index {} is a RoCEv1 GID ({}) and rocemu speaks RoCEv2 only; use {}", index,
                              format_gid(e.gid), describe(find_v2(e.gid)));
        return r;
    }
    r.entry = &e;
    r.index = static_cast<int>(index);
    return r;
}

}  // namespace rocemu::host
