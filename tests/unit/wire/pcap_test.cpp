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

}  // namespace
}  // namespace rocemu::pcap
