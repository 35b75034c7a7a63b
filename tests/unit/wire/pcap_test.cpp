// pcap::whole_records: the part of a capture file that a reader can take
// while its writer is still appending.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::pcap {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Frames of 60, 1 and 300 bytes: each cut of the file keeps the records
// that end at or before it, and what it keeps reads back as those frames.
TEST(Pcap, WholeRecordsCutsAFileBeingWrittenAtTheLastWholeRecord) {
    const std::string dir = ::testing::TempDir() + "/pcap_whole_records";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::vector<size_t> sizes{60, 1, 300};
    {
        Writer w(dir + "/all.pcap");
        ASSERT_TRUE(w.ok()) << w.error();
        for (size_t i = 0; i < sizes.size(); ++i)
            w.write(Nanos{static_cast<int64_t>(100 * (i + 1))}, std::vector<uint8_t>(sizes[i], static_cast<uint8_t>(i)));
    }
    const std::vector<uint8_t> all = read_all(dir + "/all.pcap");
    std::vector<size_t> ends{24};
    for (const size_t s : sizes) ends.push_back(ends.back() + 16 + s);
    ASSERT_EQ(all.size(), ends.back());
    for (size_t cut = 0; cut <= all.size(); ++cut) {
        size_t want = 0;
        for (const size_t e : ends)
            if (e <= cut) want = e;
        ASSERT_EQ(whole_records(std::span(all).first(cut)), want) << "cut at " << cut;
    }
    // Two records and 20 bytes of the third: libpcap reads the kept part whole.
    const size_t keep = whole_records(std::span(all).first(ends[2] + 20));
    ASSERT_EQ(keep, ends[2]);
    {
        std::ofstream f(dir + "/cut.pcap", std::ios::binary);
        f.write(reinterpret_cast<const char*>(all.data()), static_cast<std::streamsize>(keep));
    }
    Reader r(dir + "/cut.pcap");
    ASSERT_TRUE(r.ok()) << r.error();
    Frame f;
    ASSERT_TRUE(r.next(f));
    EXPECT_EQ(f.data.size(), 60u);
    EXPECT_EQ(f.ts.v, 100);
    ASSERT_TRUE(r.next(f));
    EXPECT_EQ(f.data.size(), 1u);
    EXPECT_EQ(f.ts.v, 200);
    EXPECT_FALSE(r.next(f));
    EXPECT_TRUE(r.error().empty()) << r.error();

    // The other byte order: the same records with every field swapped.
    std::vector<uint8_t> swapped = all;
    const auto swap4 = [&](size_t at) { std::reverse(swapped.begin() + at, swapped.begin() + at + 4); };
    swap4(0);
    for (size_t e = 0; e + 1 < ends.size(); ++e)
        for (size_t field = 0; field < 4; ++field) swap4(ends[e] + 4 * field);
    EXPECT_EQ(whole_records(swapped), all.size());
    EXPECT_EQ(whole_records(std::span(swapped).first(ends[2] + 15)), ends[2]);
    // Not a pcap file, or a record that claims more than is there.
    std::vector<uint8_t> other = all;
    other[0] ^= 0xff;
    EXPECT_EQ(whole_records(other), 0u);
    std::vector<uint8_t> huge = all;
    huge[ends[1] + 8] = huge[ends[1] + 9] = huge[ends[1] + 10] = huge[ends[1] + 11] = 0xff;
    EXPECT_EQ(whole_records(huge), ends[1]);
    std::filesystem::remove_all(dir);
}

// A writer whose file fills up says so when flushed (a merge onto a full
// disk said "merged" until 7 December).
TEST(Pcap, AFlushThatCannotWriteFails) {
    Writer w("/dev/full");
    ASSERT_TRUE(w.ok()) << w.error();
    w.write(Nanos{1}, std::vector<uint8_t>(60, 1));
    EXPECT_FALSE(w.flush());
    EXPECT_NE(w.error().find("No space left"), std::string::npos) << w.error();
}

// A RoCEv2 frame cut short lists its parse error and no fields: until 7
// December it printed the zeros of the fields it never reached (qp=0x000000
// psn=0 ...) as if they were the packet's.
TEST(Pcap, AFrameThatDoesNotParseIsListedWithoutMadeUpFields) {
    Reader r(std::string(ROCEMU_CAPTURES_DIR) + "/rc_send_64B.pcap");
    ASSERT_TRUE(r.ok()) << r.error();
    Frame f;
    std::vector<uint8_t> roce;
    while (roce.empty() && r.next(f))
        if (wire::classify(f.data) == wire::FrameKind::Roce) roce = f.data;
    ASSERT_FALSE(roce.empty());
    wire::RocePacket p;
    ASSERT_EQ(wire::parse_roce(roce, p), wire::ParseError::Ok);
    EXPECT_NE(wire::describe_roce(p, wire::ParseError::Ok).find(" icrc=ok"), std::string::npos);
    const std::vector<uint8_t> cut(roce.begin(), roce.begin() + 50);  // Ethernet, IPv4, part of UDP
    wire::RocePacket q;
    const wire::ParseError e = wire::parse_roce(cut, q);
    ASSERT_NE(e, wire::ParseError::Ok);
    ASSERT_NE(e, wire::ParseError::BadIcrc);
    const std::string line = wire::describe_roce(q, e);
    EXPECT_NE(line.find("does not parse: error="), std::string::npos) << line;
    EXPECT_EQ(line.find("qp="), std::string::npos) << line;
    EXPECT_EQ(line.find("psn="), std::string::npos) << line;
}

}  // namespace
}  // namespace rocemu::pcap
