// pcap files with nanosecond timestamps, read and written through libpcap.
// Output is deterministic: the same frames and times give the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/units.hpp"

struct pcap;
struct pcap_dumper;

namespace rocemu::pcap {

struct Frame {
    Nanos ts;                   // since the Unix epoch, or since 0 in virtual time
    uint32_t orig_len = 0;      // length on the wire
    std::vector<uint8_t> data;  // captured bytes (may be shorter than orig_len)
};

class Reader {
public:
    // Opens `path`; any timestamp precision in the file is read as nanoseconds.
    // On failure, ok() is false and error() says why.
    explicit Reader(const std::string& path);
    ~Reader();
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    bool ok() const { return handle_ != nullptr; }
    const std::string& error() const { return error_; }
    // False at the end of the file or on a read error (then error() is set).
    bool next(Frame& out);
    // DLT of the file (1 = Ethernet).
    int link_type() const;

private:
    ::pcap* handle_ = nullptr;
    std::string error_;
};

class Writer {
public:
    // Creates `path` as an Ethernet pcap with nanosecond resolution.
    explicit Writer(const std::string& path, uint32_t snaplen = 65535);
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    bool ok() const { return dumper_ != nullptr; }
    const std::string& error() const { return error_; }
    void write(Nanos ts, std::span<const uint8_t> frame);
    // False, with error() saying why, if what was written did not all reach
    // the file (a full disk, /dev/full).
    bool flush();

private:
    ::pcap* dead_ = nullptr;
    pcap_dumper* dumper_ = nullptr;
    uint32_t snaplen_;
    std::string error_;
};

// One file to merge and what to add to its time stamps: a capture taken on
// another machine is brought onto this machine's clock by shifting it by
// minus that machine's clock offset.
struct MergeInput {
    std::string path;
    Nanos shift{};
};

// A pcap record's time: unsigned 32-bit seconds and the nanoseconds.
inline constexpr Nanos kMaxTime{(int64_t{1} << 32) * 1000000000};

// Writes the Ethernet frames of every input into `out` in order of their
// shifted time stamps (a tie keeps the order of `in`; each file's own order
// is kept as it is). The frame count, or nullopt and `error` naming the file
// that failed (unreadable, not Ethernet, cut short, or a frame shifted
// outside [0, kMaxTime)).
std::optional<uint64_t> merge(std::span<const MergeInput> in, const std::string& out, std::string& error);

// The length of the longest prefix of `file` that is a pcap file of whole
// records: its 24-byte header and every record that fits after it (a file
// read while its writer appends may end inside a record). 0 when `file`
// does not start as a pcap file (either byte order, us or ns).
size_t whole_records(std::span<const uint8_t> file);

}  // namespace rocemu::pcap
