#include "dataplane/pcap/pcap.hpp"

#include <pcap/pcap.h>

#include <algorithm>

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
        out.ts = Nanos{static_cast<int64_t>(hdr->ts.tv_sec) * 1000000000 + hdr->ts.tv_usec};
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

void Writer::flush() {
    if (dumper_ != nullptr) pcap_dump_flush(dumper_);
}

}  // namespace rocemu::pcap
