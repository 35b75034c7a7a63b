// libFuzzer target: pcap::Reader (dataplane/pcap, what `rocemu pcap` reads)
// on arbitrary file bytes, then each frame it yields through what
// `rocemu pcap` does with it (classify, parse_roce with the ICRC checked,
// describe_roce / describe_other). The bytes are written to a memfd and
// opened by its /proc/self/fd path, as the reader takes a path.
// Invariants (abort on failure): no crash or sanitizer report; a reader
// that fails to open says why; reading stops (at most 100000 frames from a
// file this small); a frame longer than 262144 bytes (libpcap's largest
// snapshot length) is never returned. pcap::whole_records on the same bytes
// keeps 0 or the header and more, never more than there is, and keeps all
// of what it kept when given only that.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"
#include "dataplane/wire/packet.hpp"
#include "tests/fuzz/common/fuzz_input.hpp"

using namespace rocemu;

namespace {
[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_pcap_reader", what); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const size_t whole = rocemu::pcap::whole_records(std::span(data, size));
    if (whole > size || (whole != 0 && whole < 24)) fail("whole_records out of bounds");
    if (rocemu::pcap::whole_records(std::span(data, whole)) != whole) fail("whole_records of its own cut differs");
    static const int fd = ::memfd_create("fuzz_pcap", 0);
    if (fd < 0) return 0;
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
    rocemu::pcap::Reader r("/proc/self/fd/" + std::to_string(fd));
    if (!r.ok()) {
        if (r.error().empty()) fail("a reader that failed to open says nothing");
        return 0;
    }
    (void)r.link_type();
    rocemu::pcap::Frame f;
    size_t frames = 0;
    while (r.next(f)) {
        if (++frames > 100000) fail("the reader does not stop");
        if (f.data.size() > 262144) fail("a frame longer than any snapshot length");
        const std::span<const uint8_t> bytes(f.data);
        if (wire::classify(bytes) != wire::FrameKind::Roce) {
            (void)wire::describe_other(bytes);
            continue;
        }
        wire::RocePacket p;
        const wire::ParseError e = wire::parse_roce(bytes, p);
        (void)wire::describe_roce(p, e);
    }
    return 0;
}
