// libFuzzer target: what rocemu reads from an out-of-band TCP peer (rocemu_oob).
// The first input byte picks the mode:
//   0: the rest is one ibv_*_pingpong address record ("LLLL:QQQQQQ:PPPPPP:"
//      and 32 hex digits, 52 bytes with the NUL) for parse_record, at its own
//      length (so ASan sees a read past it); what parses must format back to a
//      record that parses to the same values;
//   1: the rest is the byte stream of a `rocemu perf` control connection,
//      written into a socketpair and read back with LineConn::try_recv: the
//      lines received, each with its newline, must be the stream's prefix up
//      to its last newline, and the peer's close must be reported;
//   2: the rest gives LID, QPN, PSN and GID values: format_record then
//      parse_record must give them back (QPN and PSN to 24 bits); then a few
//      bytes of that record are changed and it may be cut short, and it goes
//      through mode 0.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/common/fuzz_input.hpp"
#include "tools/rocemu/oob.hpp"

using namespace rocemu;
using namespace rocemu::oob;

namespace {

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_oob", what); }

bool same(const PingpongDest& a, const PingpongDest& b) {
    return a.lid == b.lid && a.qpn == b.qpn && a.psn == b.psn && a.gid == b.gid;
}

void record(const uint8_t* data, size_t size) {
    const std::vector<char> rec(data, data + size);  // exactly the bytes received
    const auto d = parse_record(rec.data(), rec.size());
    if (!d) return;
    if (d->qpn > 0xFFFFFF || d->psn > 0xFFFFFF) fail("a parsed QPN or PSN is wider than 24 bits");
    const auto again = format_record(*d);
    const auto d2 = parse_record(again.data(), again.size());
    if (!d2 || !same(*d, *d2)) fail("a parsed record does not format back to itself");
}

void lines(const uint8_t* data, size_t size) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return;
    size_t off = 0;
    while (off < size) {  // fits the socket buffer: inputs are at most a few KiB
        const ssize_t n = ::write(sv[1], data + off, size - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    // The end of the stream, made visible to the reader before it reads:
    // shutdown sets it at once, where close alone left it, once in 250351
    // runs of a CI fuzz round (7 December), not yet seen by a reader that
    // then reported "nothing yet" instead of the close.
    ::shutdown(sv[1], SHUT_WR);
    ::close(sv[1]);
    LineConn conn(sv[0]);  // owns sv[0] now
    std::string got, line, error;
    int r;
    int rounds = 0;
    while ((r = conn.try_recv(line, error)) == 1) {
        if (line.find('\n') != std::string::npos) fail("a line holds a newline");
        got += line;
        got += '\n';
        if (++rounds > 100000) fail("try_recv never ends");
    }
    if (r != -1 || error.empty()) fail("the peer's close is not reported");
    const std::string in(reinterpret_cast<const char*>(data), off);
    const size_t last = in.rfind('\n');
    const std::string expect = last == std::string::npos ? std::string() : in.substr(0, last + 1);
    if (got != expect) fail("the lines received are not the stream up to its last newline");
}

void round_trip(fuzz::Input in) {
    PingpongDest d;
    d.lid = in.u16();
    d.qpn = in.u32() & 0xFFFFFF;
    d.psn = in.u32() & 0xFFFFFF;
    for (auto& b : d.gid) b = in.u8();
    const auto rec = format_record(d);
    if (rec[kRecordLen - 1] != '\0') fail("a formatted record does not end in NUL");
    const auto back = parse_record(rec.data(), rec.size());
    if (!back || !same(d, *back)) fail("format_record then parse_record loses a value");
    // Then a few bytes of that record changed, and it cut short or not: a
    // record that is nearly right reaches every check of the parser.
    auto bad = rec;
    for (uint8_t edits = in.u8() % 4; edits > 0; --edits) bad[in.u8() % kRecordLen] = static_cast<char>(in.u8());
    record(reinterpret_cast<const uint8_t*>(bad.data()), kRecordLen - in.u8() % 3);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    switch (data[0] % 3) {
        case 0: record(data + 1, size - 1); break;
        case 1: lines(data + 1, size - 1); break;
        default: round_trip(fuzz::Input{data + 1, size - 1}); break;
    }
    return 0;
}
