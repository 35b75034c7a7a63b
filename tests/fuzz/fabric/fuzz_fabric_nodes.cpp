// libFuzzer target: what a node of a split live fabric parses from other
// nodes, which may run on other machines (fabric/live): a switch's counter
// snapshot (a file in the link folder, or a control reply over TCP), a clock
// datagram (UDP) and a HOST:PORT (the command line). The input is read as
// each of them.
// Invariants (abort on failure): no crash or sanitizer report; a snapshot
// that parses formats back to text that parses to the same snapshot, and
// any text cut short of its end line is refused; a datagram that decodes
// was 40 bytes and encodes back to the same bytes; a HOST:PORT that parses
// has a port other than 0 and formats back to text that parses alike.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "fabric/live/clock_relay.hpp"
#include "fabric/live/control.hpp"
#include "fabric/live/split.hpp"
#include "tests/fuzz/common/fuzz_input.hpp"

using namespace rocemu::fabric::live;

namespace {
[[noreturn]] void fail(const char* what) { rocemu::fuzz::fail("fuzz_fabric_nodes", what); }

bool same(const SwitchSnapshot& a, const SwitchSnapshot& b) {
    return a.at_ns == b.at_ns && a.realtime_ns == b.realtime_ns && a.node == b.node && a.fabric == b.fabric &&
           a.ready == b.ready && a.rows == b.rows;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    if (const std::optional<SwitchSnapshot> s = parse_snapshot(text)) {
        const std::string again = format_snapshot(*s);
        const std::optional<SwitchSnapshot> back = parse_snapshot(again);
        if (!back || !same(*s, *back)) fail("a parsed snapshot does not survive format and parse");
        if (parse_snapshot(std::string_view(again).substr(0, again.size() - 1)))
            fail("a snapshot cut short of its end line parses");
    }

    const std::span<const uint8_t> bytes(data, size);
    if (const std::optional<ClockDatagram> d = decode_clock_datagram(bytes)) {
        if (size != kClockDatagramBytes) fail("a datagram of another length decodes");
        const auto back = encode(*d);
        const std::optional<ClockDatagram> again = decode_clock_datagram(back);
        if (!again || again->kind != d->kind || again->tag != d->tag || again->seq != d->seq || again->fabric != d->fabric ||
            again->domain != d->domain || again->time != d->time)
            fail("a decoded datagram does not survive encode and decode");
    }

    for (const bool any : {false, true}) {
        const std::optional<HostPort> hp = parse_host_port(text, any);
        if (!hp) continue;
        if (!any && hp->port == 0) fail("port 0 parses without allow_any_port");
        const std::optional<HostPort> back = parse_host_port(format_host_port(*hp), any);
        if (!back || back->host != hp->host || back->port != hp->port) fail("a HOST:PORT does not survive format and parse");
    }
    return 0;
}
