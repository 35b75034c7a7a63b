// The port's GID table, laid out the way a real RoCE device lists it, and the
// check a QP's address vector must pass before the QP can go to RTR.
//
// connectx: 0 RoCEv1 link-local, 1 RoCEv2 link-local, 2 RoCEv1 IPv4-mapped,
//           3 RoCEv2 IPv4-mapped (so NCCL_IB_GID_INDEX=3 means what it means
//           on mlx5).
// rxe:      0 RoCEv2 link-local, 1 RoCEv2 IPv4-mapped.
// rocemu sends RoCEv2 only; a RoCEv1 entry is listed so indexes match the
// hardware, and naming it is an error that points at its RoCEv2 twin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/fixed_vec.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::host {

enum class GidType : uint8_t { RoceV1, RoceV2 };
enum class GidLayout : uint8_t { ConnectX, Rxe };

const char* to_string(GidType t);
const char* to_string(GidLayout l);
// "connectx" or "rxe"; nullopt for anything else.
std::optional<GidLayout> parse_gid_layout(std::string_view s);

struct GidEntry {
    wire::IpAddr gid;
    GidType type = GidType::RoceV2;
};

// The fe80::/64 GID whose interface identifier is the modified EUI-64 of `mac`.
wire::IpAddr link_local_gid(const wire::MacAddr& mac);
// Inverse of link_local_gid: the MAC inside a fe80::/64 EUI-64 GID, if it is one.
std::optional<wire::MacAddr> mac_from_link_local(const wire::IpAddr& gid);
bool is_link_local(const wire::IpAddr& gid);
// A GID as rdma-core prints it: ::ffff:a.b.c.d for IPv4, full hex groups otherwise.
std::string format_gid(const wire::IpAddr& gid);

// Outcome of checking a GID index. On failure `error` says what is wrong and
// names the index to use instead.
struct GidCheck {
    const GidEntry* entry = nullptr;
    int index = -1;
    std::string error;
    bool ok() const { return entry != nullptr; }
};

class GidTable {
public:
    static constexpr size_t kMaxEntries = 4;

    GidTable(GidLayout layout, const wire::MacAddr& mac, std::optional<uint32_t> ipv4);

    GidLayout layout() const { return layout_; }
    size_t size() const { return entries_.size(); }
    const GidEntry& operator[](size_t i) const { return entries_[i]; }

    // Index of the RoCEv2 entry holding `gid`, or -1.
    int find_v2(const wire::IpAddr& gid) const;
    // The index a RoCEv2 application should use by default: the IPv4-mapped
    // RoCEv2 entry if the port has IPv4, else the RoCEv2 link-local one.
    int default_v2_index() const;

    // Checks the local GID index of an address vector: it must exist and be RoCEv2.
    GidCheck check_sgid_index(uint32_t index) const;

private:
    std::string describe(int index) const;

    GidLayout layout_;
    FixedVec<GidEntry, kMaxEntries> entries_;
};

}  // namespace rocemu::host
