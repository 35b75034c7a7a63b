#include "dataplane/pcap/pcap.hpp"

#include <pcap/pcap.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace rocemu::pcap {

Reader::Reader(const std::string& path) {
    char err[PCAP_ERRBUF_SIZE] = {};
    handle_ = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
    if (handle_ == nullptr) error_ = err;
}

Reader::~Reader() {
    if (handle_ != nullptr) pcap_close(handle_);
}

int Reader::link_type() const { return handle_ != nullptr ? pcap_datalink(handle_) : -1; }

bool Reader::next(Frame& out) {
    if (handle_ == nullptr) return false;
    pcap_pkthdr* hdr = nullptr;
    const u_char* data = nullptr;
    const int rc = pcap_next_ex(handle_, &hdr, &data);
    if (rc == 1) {
        // The file's seconds are unsigned 32 bits (1970 to 2106); libpcap
        // hands them over as a signed 32-bit value.
        out.ts = Nanos{static_cast<int64_t>(static_cast<uint32_t>(hdr->ts.tv_sec)) * 1000000000 + hdr->ts.tv_usec};
        out.orig_len = hdr->len;
        out.data.assign(data, data + hdr->caplen);
        return true;
    }
    if (rc == PCAP_ERROR) error_ = pcap_geterr(handle_);
    return false;
}

Writer::Writer(const std::string& path, uint32_t snaplen) : snaplen_(snaplen) {
    dead_ = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, static_cast<int>(snaplen), PCAP_TSTAMP_PRECISION_NANO);
    if (dead_ == nullptr) {
        error_ = "pcap_open_dead failed";
        return;
    }
    dumper_ = pcap_dump_open(dead_, path.c_str());
    if (dumper_ == nullptr) error_ = pcap_geterr(dead_);
}

Writer::~Writer() {
    if (dumper_ != nullptr) pcap_dump_close(dumper_);
    if (dead_ != nullptr) pcap_close(dead_);
}

void Writer::write(Nanos ts, std::span<const uint8_t> frame) {
    if (dumper_ == nullptr) return;
    pcap_pkthdr hdr{};
    hdr.ts.tv_sec = ts.v / 1000000000;
    hdr.ts.tv_usec = ts.v % 1000000000;  // nanoseconds: the file says so in its magic
    hdr.len = static_cast<bpf_u_int32>(frame.size());
    hdr.caplen = std::min<bpf_u_int32>(hdr.len, snaplen_);
    pcap_dump(reinterpret_cast<u_char*>(dumper_), &hdr, frame.data());
}

bool Writer::flush() {
    if (dumper_ == nullptr) return false;
    if (pcap_dump_flush(dumper_) != 0 || std::ferror(pcap_dump_file(dumper_)) != 0) {
        error_ = fmt::format("writing failed: {}", std::strerror(errno));
        return false;
    }
    return true;
}

std::optional<uint64_t> merge(std::span<const MergeInput> in, const std::string& out, std::string& error) {
    std::vector<std::unique_ptr<Reader>> readers;
    std::vector<Frame> head(in.size());
    std::vector<bool> more(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        // Shifted within the pcap range, a frame's time cannot overflow.
        if (in[i].shift <= Nanos{0} - kMaxTime || in[i].shift >= kMaxTime) {
            error = fmt::format("{}: a shift of {} ns is more than a pcap file's 2^32 s", in[i].path, in[i].shift.v);
            return std::nullopt;
        }
        readers.push_back(std::make_unique<Reader>(in[i].path));
        if (!readers[i]->ok()) {
            error = fmt::format("cannot read {}: {}", in[i].path, readers[i]->error());
            return std::nullopt;
        }
        if (readers[i]->link_type() != 1) {
            error = fmt::format("{}: link type {} is not Ethernet", in[i].path, readers[i]->link_type());
            return std::nullopt;
        }
        more[i] = readers[i]->next(head[i]);
    }
    Writer w(out);
    if (!w.ok()) {
        error = fmt::format("cannot write {}: {}", out, w.error());
        return std::nullopt;
    }
    uint64_t frames = 0;
    for (;;) {
        size_t pick = in.size();
        for (size_t i = 0; i < in.size(); ++i)
            if (more[i] && (pick == in.size() || head[i].ts + in[i].shift < head[pick].ts + in[pick].shift)) pick = i;
        if (pick == in.size()) break;
        const Nanos at = head[pick].ts + in[pick].shift;
        if (at < Nanos{0} || at >= kMaxTime) {
            error = fmt::format("{}: shifted by {} ns, a frame at {} ns would be at {} ns, outside what a pcap file "
                                "holds (0 to 2^32 s: 1970 to 2106)",
                                in[pick].path, in[pick].shift.v, head[pick].ts.v, at.v);
            return std::nullopt;
        }
        w.write(at, head[pick].data);
        ++frames;
        more[pick] = readers[pick]->next(head[pick]);
    }
    for (size_t i = 0; i < in.size(); ++i)
        if (!readers[i]->error().empty()) {
            error = fmt::format("{}: {}", in[i].path, readers[i]->error());
            return std::nullopt;
        }
    if (!w.flush()) {
        error = fmt::format("{}: {}", out, w.error());
        return std::nullopt;
    }
    return frames;
}

size_t whole_records(std::span<const uint8_t> file) {
    constexpr size_t kFileHeader = 24, kRecordHeader = 16;
    const auto u32 = [&](size_t at, bool swap) {
        uint32_t v = 0;
        std::memcpy(&v, file.data() + at, 4);
        return swap ? __builtin_bswap32(v) : v;
    };
    if (file.size() < kFileHeader) return 0;
    bool swap = false;
    bool known = false;
    for (const uint32_t magic : {0xa1b2c3d4u, 0xa1b23c4du}) {
        if (u32(0, false) == magic) known = true;
        if (u32(0, true) == magic) known = swap = true;
    }
    if (!known) return 0;
    size_t end = kFileHeader;
    while (file.size() - end >= kRecordHeader) {
        const uint32_t caplen = u32(end + 8, swap);
        if (caplen > file.size() - end - kRecordHeader) break;
        end += kRecordHeader + caplen;
    }
    return end;
}

}  // namespace rocemu::pcap
