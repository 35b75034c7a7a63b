#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::test {

inline std::vector<std::string> capture_files() {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(ROCEMU_CAPTURES_DIR))
        if (e.path().extension() == ".pcap") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
}

// Every RoCEv2 frame of every capture, with the file it came from.
struct CapturedFrame {
    std::string file;
    std::vector<uint8_t> bytes;
};

inline std::vector<CapturedFrame> captured_roce_frames() {
    std::vector<CapturedFrame> out;
    for (const auto& f : capture_files()) {
        pcap::Reader r(f);
        pcap::Frame fr;
        while (r.next(fr))
            if (wire::classify(fr.data) == wire::FrameKind::Roce) out.push_back({f, fr.data});
    }
    return out;
}

}  // namespace rocemu::test
